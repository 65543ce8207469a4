// SPDX-License-Identifier: Apache-2.0
// Callables a template can hold as values: macros (and a call block's `caller`), global
// functions (range, namespace, raise_exception...) and methods bound to a value
// (`message.content.split`), plus the variable scopes macros close over.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/chat/jinja/ast.h"
#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

// One level of variables: the template's top level, a for-loop iteration, a macro call.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find_local(std::string_view name) const {
    for (const auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  void set(std::string_view name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(std::string(name), std::move(v));
  }
};

enum class CallableKind : uint8_t { macro, global, method };

struct Callable {
  CallableKind kind = CallableKind::global;
  std::string name;            // macro, global or method name
  const Stmt* def = nullptr;   // macro: its definition (a macro or a call block)
  // macro: the scope it was defined in. Weak, so a macro stored in its own scope is no
  // cycle; a macro called after that scope ended is an error.
  std::weak_ptr<Scope> closure;
  Value self;                  // method: the bound value
  // caller(): the macro that a call block's body belongs to passes it on.
  std::shared_ptr<const Callable> caller;
};

// Arguments of a call, filter or test (after the filtered / tested value).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

}  // namespace llmsvc::jinja
