// First values of variables. The draws are spelled out here (rather than left to
// std::*_distribution, whose algorithms differ between standard libraries) so that any
// implementation of the rule in docs/runtime.md reproduces them bit for bit.
#include "runtime/reference/Initializers.h"

#include <cmath>
#include <random>

#include "ir/Diagnostic.h"
#include "ir/Initializer.h"
#include "ir/ValuesFile.h"

namespace prism::runtime::reference {

uint64_t variableSeed(uint64_t globalSeed, llvm::StringRef name) {
  return streamSeed(globalSeed, name);
}

Fans computeFans(llvm::ArrayRef<int64_t> shape) {
  Fans f;
  if (shape.empty())
    return f;
  if (shape.size() == 1) {
    f.in = f.out = static_cast<double>(shape[0]);
    return f;
  }
  // Leading dimensions beyond the last two form the receptive field ([kh, kw, cin, cout]).
  double receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    receptive *= static_cast<double>(shape[i]);
  f.in = receptive * static_cast<double>(shape[shape.size() - 2]);
  f.out = receptive * static_cast<double>(shape.back());
  return f;
}

namespace {

constexpr double kPi = 3.14159265358979323846;

// A uniform double in [0, 1) from the top 53 bits of one draw.
double unitUniform(std::mt19937_64 &gen) {
  return static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
}

// One standard normal value from two draws (Box-Muller, cosine branch only).
double standardNormal(std::mt19937_64 &gen) {
  double u1 = unitUniform(gen);
  double u2 = unitUniform(gen);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * kPi * u2);
}

} // namespace

llvm::Expected<Tensor> initialValue(const ir::Initializer &init, const ir::TensorType &type,
                                    llvm::StringRef name, uint64_t globalSeed,
                                    llvm::StringRef modelFile) {
  if (type.sparse)
    return ir::makeError("variable '" + name + "' cannot have the sparse type " + type.str());
  for (int64_t d : type.dims)
    if (d < 0)
      return ir::makeError("variable '" + name + "' needs a static shape, got " + type.str());
  if (auto e = ir::checkInitializer(init))
    return ir::makeError("variable '" + name + "': " + ir::messageOf(std::move(e)));
  Tensor t(type.dtype, type.dims);
  std::mt19937_64 gen(variableSeed(globalSeed, name));
  auto param = [&](llvm::StringRef p) { return ir::initializerParam(init, p); };
  const std::string &kind = init.kind;
  if (kind == "zeros" || kind == "ones" || kind == "constant") {
    double fill = kind == "ones" ? 1.0 : kind == "constant" ? param("value") : 0.0;
    std::fill(t.data().begin(), t.data().end(), fill);
  } else if (kind == "glorot_uniform") {
    Fans f = computeFans(type.dims);
    double limit = std::sqrt(6.0 / (f.in + f.out));
    for (double &v : t.data())
      v = -limit + 2.0 * limit * unitUniform(gen);
  } else if (kind == "normal") {
    double mean = param("mean"), stddev = param("stddev");
    for (double &v : t.data())
      v = mean + stddev * standardNormal(gen);
  } else if (kind == "uniform") {
    double lo = param("min"), hi = param("max");
    for (double &v : t.data())
      v = lo + (hi - lo) * unitUniform(gen);
  } else if (std::optional<ir::ValuesSource> source = ir::valuesSource(init)) {
    auto values = ir::readValuesRecord(ir::resolveValuesFile(source->file, modelFile),
                                       source->offset, type.numElements());
    if (!values)
      return ir::withContext(values.takeError(), "variable '" + name + "'");
    std::copy(values->begin(), values->end(), t.data().begin());
  } else {
    return ir::makeError("variable '" + name + "': initializer '" + kind +
                         "' has no reference implementation");
  }
  conformToDType(t);
  return t;
}

llvm::Expected<Tensor> initialValue(const ir::Variable &variable, uint64_t globalSeed,
                                    llvm::StringRef modelFile) {
  if (!variable.value->hasType())
    return ir::makeError("variable '" + variable.name() + "' has no type");
  return initialValue(variable.init, variable.type(), variable.name(), globalSeed, modelFile);
}

} // namespace prism::runtime::reference
