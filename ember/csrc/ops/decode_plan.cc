// Host module: the batch-decode planner (ember/decode_plan.h) behind validation (R3.3), for
// planning without a GPU. Inputs and outputs are CPU int32 tensors. On a GPU the decode module's
// `plan_upload` runs the same planner and copies the tables to the device in one call.
#include <tvm/ffi/function.h>

#include "decode_plan_binding.h"

TVM_FFI_DLL_EXPORT_TYPED_FUNC(plan, ember::decode_binding::plan_tables);
