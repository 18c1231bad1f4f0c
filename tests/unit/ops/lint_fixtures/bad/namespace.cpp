// Lint fixture (not compiled): the kernels' namespace imported, opened, aliased.
using namespace strata::cpu;
namespace k = strata::cpu;
namespace strata::cpu {
}
