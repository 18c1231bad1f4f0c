/* Preloaded (LD_PRELOAD) by `scripts/test --sanitize address` only: dlclose does nothing, so the
 * shared objects a process opened stay mapped until it exits and LeakSanitizer, which reports at
 * exit, can name them in its stacks. Open MPI 4.1 unloads its plugins (mca_*.so) in MPI_Finalize and
 * has no switch to keep them (mca_base_component_disable_dlclose came with Open MPI 5); without this
 * their leaks show as "<unknown module>" and lsan.supp could not suppress them by name. Built
 * without any sanitizer. */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
