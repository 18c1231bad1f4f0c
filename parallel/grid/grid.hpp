// The process grid dp × tp × pp with Megatron's rank order (tensor-parallel fastest, then data
// parallel, then pipeline) and a Group for each axis.
#pragma once

#include "parallel/comm/group.hpp"

namespace strata::parallel {

struct GridCoords {
  int dp = 0, tp = 0, pp = 0;
};

class Grid {
 public:
  // Splits `world` into tp × dp × pp. Throws UserError when world.size() is not a multiple of
  // tp × pp, naming the numbers. A planning world (comm/planning.hpp) gets planning axis groups.
  Grid(const Group& world, int tensor_parallel, int pipeline_parallel);

  const Group& world() const { return world_; }
  const Group& dp() const { return dp_; }
  const Group& tp() const { return tp_; }
  const Group& pp() const { return pp_; }
  int dp_size() const { return dp_size_; }
  int tp_size() const { return tp_size_; }
  int pp_size() const { return pp_size_; }
  GridCoords coords() const { return coords_of(world_.rank()); }

  // A rank's coordinates: rank = pp * (dp_size * tp_size) + dp * tp_size + tp.
  GridCoords coords_of(int rank) const;

 private:
  Group world_, dp_, tp_, pp_;
  int dp_size_, tp_size_, pp_size_;
};

}  // namespace strata::parallel
