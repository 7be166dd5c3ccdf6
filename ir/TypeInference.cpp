// Type inference over a whole module.
#include "ir/TypeInference.h"

#include <string>

#include "ir/Diagnostic.h"
#include "ir/OpTable.h"

namespace prism::ir {

llvm::Expected<int64_t> inferTypes(Module &module, DeclaredTypes declared) {
  int64_t typed = 0;
  for (const auto &op : module.ops()) {
    auto where = [&] {
      return "'" + op->name().str() + "'" +
             (op->numResults() ? " defining " + op->result(0)->ref() : std::string());
    };
    auto types = inferResultTypes(*op);
    if (!types)
      return withLocation(withContext(types.takeError(), where()), module.sourceFile(), op->loc);
    for (unsigned i = 0; i < op->numResults(); ++i) {
      Value *result = op->result(i);
      const TensorType &inferred = (*types)[i];
      if (result->hasType() && result->type() == inferred)
        continue;
      if (result->hasType() && declared == DeclaredTypes::Check)
        return makeError(module.sourceFile(), op->loc,
                         where() + ": result " + result->ref() + " is declared " +
                             result->type().str() + " but the op gives " + inferred.str());
      result->setType(inferred);
      ++typed;
    }
  }
  return typed;
}

} // namespace prism::ir
