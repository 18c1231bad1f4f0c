#include "parallel/grid/grid.hpp"

#include "framework/core/error.hpp"
#include "parallel/comm/planning.hpp"

namespace strata::parallel {

Grid::Grid(const Group& world, int tp, int pp) : world_(world), tp_size_(tp), pp_size_(pp) {
  if (tp < 1 || pp < 1)
    user_fail("grid", "tensor_parallel_size ({}) and pipeline_parallel_size ({}) must be >= 1", tp, pp);
  const int n = world.size();
  if (n % (tp * pp) != 0)
    user_fail("grid", "world size {} is not divisible by tensor_parallel_size {} x "
              "pipeline_parallel_size {} = {}: launch a multiple of {} ranks or change the sizes",
              n, tp, pp, tp * pp, tp * pp);
  dp_size_ = n / (tp * pp);
  const GridCoords c = coords_of(world.rank());
  if (is_planning(world)) {  // a plan: the axis groups of this rank, on paper (comm/planning.hpp)
    dp_ = planning_world(dp_size_, c.dp, "dp");
    tp_ = planning_world(tp_size_, c.tp, "tp");
    pp_ = planning_world(pp_size_, c.pp, "pp");
    return;
  }
  dp_ = world.split(c.pp * tp_size_ + c.tp, c.dp, "dp");
  tp_ = world.split(c.pp * dp_size_ + c.dp, c.tp, "tp");
  pp_ = world.split(c.dp * tp_size_ + c.tp, c.pp, "pp");
}

GridCoords Grid::coords_of(int rank) const {
  GridCoords c;
  c.tp = rank % tp_size_;
  c.dp = (rank / tp_size_) % dp_size_;
  c.pp = rank / (tp_size_ * dp_size_);
  return c;
}

}  // namespace strata::parallel
