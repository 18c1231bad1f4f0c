# Sourced by the e2e scripts that run on cluster/netns nodes: `require_netns` exits 77 (skipped),
# saying why, unless this machine lets them run: root, `ip`, `ip netns add`, entering a namespace
# with a hostname of its own (ip netns exec, unshare --uts) and a writable /etc/netns (the nodes'
# hosts files). Needs the script's `skip` (echo the reason, exit 77).
require_netns() {
  [[ $(id -u) == 0 ]] || skip "not root: network namespaces need root"
  command -v ip >/dev/null || skip "no ip command (Debian's iproute2; scripts/setup installs it)"
  ip netns add strata-probe-$$ 2>/dev/null || skip "ip netns add is not allowed here"
  local ok=1
  ip netns exec strata-probe-$$ unshare --uts /bin/sh -c 'hostname probe' 2>/dev/null || ok=0
  mkdir -p /etc/netns 2>/dev/null && [[ -w /etc/netns ]] || ok=2
  ip netns del strata-probe-$$
  ((ok != 0)) || skip "entering a namespace (ip netns exec, unshare --uts) is not allowed here"
  ((ok != 2)) || skip "/etc/netns is not writable (the nodes' hosts files go there)"
}
