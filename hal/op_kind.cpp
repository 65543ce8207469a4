// SPDX-License-Identifier: Apache-2.0
// Op kind names, for statistics and errors.
#include "hal/op_kind.h"

namespace llmsvc::hal {

std::string_view op_name(OpKind k) {
  switch (k) {
    case OpKind::get_rows: return "get_rows";
    case OpKind::rms_norm: return "rms_norm";
    case OpKind::matmul: return "matmul";
    case OpKind::add_bias: return "add_bias";
    case OpKind::rope: return "rope";
    case OpKind::scale: return "scale";
    case OpKind::store_kv: return "store_kv";
    case OpKind::attention: return "attention";
    case OpKind::last_rows: return "last_rows";
    case OpKind::add: return "add";
    case OpKind::swiglu: return "swiglu";
    case OpKind::geglu: return "geglu";
    case OpKind::copy: return "copy";
    case OpKind::count_: break;
  }
  return "?";
}

}  // namespace llmsvc::hal
