// Lint fixture (not compiled): the trainer calling the optimizer and overflow kernels directly.
void step() {
  strata::optim::adamw_step(p, g, m, v, n, h, 1);
  if (precision::has_inf_or_nan(g, n)) return;
}
