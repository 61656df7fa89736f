// fi_getinfo: filter by the hints, then build one fi_info that echoes what the application asked
// for. Every rejection is -FI_ENODATA, the answer that makes libfabric try other providers and
// fabtests report "not run" rather than "failed".
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

#include "core/log.hpp"
#include "dev/address.hpp"
#include "fi/attr.hpp"
#include "fi/params.hpp"
#include "fi/provider.hpp"

namespace exanet::fi {
namespace {

// ---- node and service ---------------------------------------------------------------------

bool is_local_ip(const char* node) noexcept {
  in_addr v4{};
  in6_addr v6{};
  const bool is4 = inet_pton(AF_INET, node, &v4) == 1;
  const bool is6 = !is4 && inet_pton(AF_INET6, node, &v6) == 1;
  if (!is4 && !is6) return false;
  if (is4 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  if (is6 && IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (is4 && i->ifa_addr->sa_family == AF_INET)
      found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    else if (is6 && i->ifa_addr->sa_family == AF_INET6)
      found = std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, &v6,
                          sizeof v6) == 0;
  }
  freeifaddrs(list);
  return found;
}

/// The emulated device is this host: a node name must name it.
bool is_this_node(const char* node) noexcept {
  if (!node || !*node) return true;
  if (std::strcmp(node, "localhost") == 0 || std::strcmp(node, "localhost.localdomain") == 0)
    return true;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    if (std::strcmp(node, host) == 0) return true;
    // A short name matches the host's fully qualified name and the other way round.
    const std::size_t n = std::strcspn(host, ".");
    if (std::strncmp(node, host, n) == 0 && (node[n] == '\0' || node[n] == '.')) return true;
  }
  return is_local_ip(node);
}

bool parse_port(const char* service, std::uint32_t& port) noexcept {
  if (!service || !*service) {
    port = 0;
    return true;
  }
  char* end = nullptr;
  const unsigned long v = std::strtoul(service, &end, 10);
  if (*end != '\0' || v >= dev::first_auto_port) return false;
  port = static_cast<std::uint32_t>(v);
  return true;
}

bool valid_address(const void* addr, std::size_t len) noexcept {
  if (!addr || len != sizeof(dev::address)) return false;
  dev::address a;
  std::memcpy(&a, addr, sizeof a);
  return a.valid();
}

void* copy_address(const dev::address& a) noexcept {
  void* p = std::malloc(sizeof a);  // freed by fi_freeinfo
  if (p) std::memcpy(p, &a, sizeof a);
  return p;
}

// ---- hint checks --------------------------------------------------------------------------

template <class T>
bool is_subset(T want, T have) noexcept {
  return (want & ~have) == 0;
}

bool check_tx(const fi_tx_attr* a) noexcept {
  if (!a) return true;
  return is_subset<std::uint64_t>(a->caps, all_caps) &&
         is_subset<std::uint64_t>(a->op_flags, tx_op_flags_supported) &&
         is_subset<std::uint64_t>(a->msg_order, msg_order_supported) &&
         is_subset<std::uint64_t>(a->comp_order, FI_ORDER_NONE) && a->iov_limit <= iov_limit &&
         a->rma_iov_limit <= iov_limit;
}

bool check_rx(const fi_rx_attr* a) noexcept {
  if (!a) return true;
  return is_subset<std::uint64_t>(a->caps, all_caps) &&
         is_subset<std::uint64_t>(a->op_flags, rx_op_flags_supported) &&
         is_subset<std::uint64_t>(a->msg_order, msg_order_supported) &&
         is_subset<std::uint64_t>(a->comp_order, FI_ORDER_NONE) && a->iov_limit <= iov_limit;
}

bool check_domain(const fi_domain_attr* d) noexcept {
  if (!d) return true;
  if (d->name && std::strcmp(d->name, domain_name) != 0) return false;
  // Manual progress only: an application that needs FI_PROGRESS_AUTO must look elsewhere.
  if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO) return false;
  if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE)
    return false;
  if (d->cq_data_size > cq_data_size || d->max_ep_tx_ctx > 1 || d->max_ep_rx_ctx > 1 ||
      d->max_ep_stx_ctx > 0 || d->max_ep_srx_ctx > 0 || d->mr_iov_limit > mr_iov_limit)
    return false;
  return is_subset<std::uint64_t>(d->caps, FI_LOCAL_COMM | FI_REMOTE_COMM);
}

bool check_ep(const fi_ep_attr* e) noexcept {
  if (!e) return true;
  if (e->type != FI_EP_UNSPEC && e->type != FI_EP_RDM) return false;
  if (e->protocol != FI_PROTO_UNSPEC) return false;
  if (e->max_msg_size > max_msg_size) return false;
  if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1) return false;  // no shared or scalable contexts
  return e->auth_key_size == 0;
}

bool check_fabric(const fi_fabric_attr* f) noexcept {
  if (!f) return true;
  if (f->name && std::strcmp(f->name, fabric_name) != 0) return false;
  if (f->prov_name && std::strcmp(f->prov_name, provider_name) != 0) return false;
  return f->prov_version <= provider_version;
}

bool check_hints(const fi_info* h) noexcept {
  if (!h) return true;
  if (!is_subset<std::uint64_t>(h->caps, all_caps)) return false;
  if (h->addr_format != FI_FORMAT_UNSPEC) return false;
  if (h->src_addr && !valid_address(h->src_addr, h->src_addrlen)) return false;
  if (h->dest_addr && !valid_address(h->dest_addr, h->dest_addrlen)) return false;
  return check_tx(h->tx_attr) && check_rx(h->rx_attr) && check_ep(h->ep_attr) &&
         check_domain(h->domain_attr) && check_fabric(h->fabric_attr);
}

// ---- building the answer --------------------------------------------------------------------

std::uint64_t answer_caps(const fi_info* h) noexcept {
  const std::uint64_t asked = h ? h->caps & primary_caps : 0;
  // No primary capability asked for means "whatever you have".
  return (asked ? asked : primary_caps) | secondary_caps;
}

int fill(std::uint32_t version, const fi_info* h, const proto::config& cfg, fi_info& fi) noexcept {
  const std::uint64_t caps = answer_caps(h);
  fi.caps = caps;
  fi.mode = 0;
  fi.addr_format = FI_FORMAT_UNSPEC;

  fi_tx_attr& tx = *fi.tx_attr;
  tx.caps = caps;
  tx.mode = 0;
  tx.op_flags = h && h->tx_attr ? h->tx_attr->op_flags : 0;
  tx.msg_order = msg_order_supported;
  tx.comp_order = FI_ORDER_NONE;
  tx.inject_size = cfg.inject_size;
  if (h && h->tx_attr && h->tx_attr->inject_size && h->tx_attr->inject_size < tx.inject_size)
    tx.inject_size = h->tx_attr->inject_size;
  tx.size = h && h->tx_attr && h->tx_attr->size ? h->tx_attr->size : cfg.tx_size;
  tx.iov_limit = h && h->tx_attr && h->tx_attr->iov_limit ? h->tx_attr->iov_limit : iov_limit;
  tx.rma_iov_limit = h && h->tx_attr && h->tx_attr->rma_iov_limit ? h->tx_attr->rma_iov_limit
                                                                  : iov_limit;

  fi_rx_attr& rx = *fi.rx_attr;
  rx.caps = caps;
  rx.mode = 0;
  rx.op_flags = h && h->rx_attr ? h->rx_attr->op_flags : 0;
  rx.msg_order = msg_order_supported;
  rx.comp_order = FI_ORDER_NONE;
  rx.total_buffered_recv = 0;
  rx.size = h && h->rx_attr && h->rx_attr->size ? h->rx_attr->size : cfg.rx_size;
  rx.iov_limit = h && h->rx_attr && h->rx_attr->iov_limit ? h->rx_attr->iov_limit : iov_limit;

  fi_ep_attr& ep = *fi.ep_attr;
  ep.type = FI_EP_RDM;
  ep.protocol = FI_PROTO_UNSPEC;
  ep.protocol_version = 1;
  ep.max_msg_size = max_msg_size;
  ep.msg_prefix_size = 0;
  ep.max_order_raw_size = ep.max_order_war_size = ep.max_order_waw_size = 0;
  ep.mem_tag_format = mem_tag_format;
  ep.tx_ctx_cnt = ep.rx_ctx_cnt = 1;
  ep.auth_key_size = 0;

  fi_domain_attr& d = *fi.domain_attr;
  const fi_domain_attr* hd = h ? h->domain_attr : nullptr;
  d.name = strdup(domain_name);
  d.threading = hd && hd->threading != FI_THREAD_UNSPEC ? hd->threading : FI_THREAD_SAFE;
  d.control_progress = FI_PROGRESS_MANUAL;
  d.data_progress = FI_PROGRESS_MANUAL;
  d.resource_mgmt = hd && hd->resource_mgmt != FI_RM_UNSPEC ? hd->resource_mgmt : FI_RM_ENABLED;
  d.av_type = hd ? hd->av_type : FI_AV_UNSPEC;
  // exanet requires nothing (mr_mode 0). Modes the application offers and exanet can honour
  // come back, so it gets the keys and addressing it asked for (MPICH offers VIRT_ADDR,
  // PROV_KEY and ENDPOINT and then binds and enables each region). Before API 1.5 the field
  // could only say FI_MR_BASIC or FI_MR_SCALABLE.
  const int asked_mr = hd ? hd->mr_mode : 0;
  if (FI_VERSION_LT(version, FI_VERSION(1, 5)) || asked_mr == FI_MR_BASIC ||
      asked_mr == FI_MR_SCALABLE)
    d.mr_mode = asked_mr == FI_MR_BASIC ? FI_MR_BASIC : FI_MR_SCALABLE;
  else
    d.mr_mode = static_cast<int>(static_cast<std::uint64_t>(asked_mr) & mr_mode_supported);
  d.mr_key_size = 8;
  d.cq_data_size = cq_data_size;
  d.cq_cnt = 1024;
  d.ep_cnt = 1024;
  d.tx_ctx_cnt = d.rx_ctx_cnt = 1024;
  d.max_ep_tx_ctx = d.max_ep_rx_ctx = 1;
  d.max_ep_stx_ctx = d.max_ep_srx_ctx = 0;
  d.cntr_cnt = 1024;
  d.mr_iov_limit = mr_iov_limit;
  d.caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
  d.mode = 0;
  d.max_err_data = 64;
  d.mr_cnt = cfg.mr_keys;  // one protection-table entry per registration and endpoint

  fi_fabric_attr& f = *fi.fabric_attr;
  f.name = strdup(fabric_name);
  f.prov_name = nullptr;  // the core fills it; a value here would read "exanet;exanet"
  f.prov_version = provider_version;
  return d.name && f.name ? 0 : -FI_ENOMEM;
}

int set_addresses(const char* node, const char* service, std::uint64_t flags, const fi_info* h,
                  const proto::config& cfg, fi_info& fi) noexcept {
  dev::address local{};
  local.node = cfg.node;
  local.pdid = cfg.pdid;
  dev::address src = local, dest = local;
  bool have_dest = false;

  if (node || service) {
    std::uint32_t port = 0;
    if (!is_this_node(node) || !parse_port(service, port)) return -FI_ENODATA;
    if (flags & FI_SOURCE) {
      src.port = port;
    } else {
      dest.port = port;
      have_dest = true;
    }
  }
  if (h && h->src_addr) std::memcpy(&src, h->src_addr, sizeof src);
  if (h && h->dest_addr) {
    std::memcpy(&dest, h->dest_addr, sizeof dest);
    have_dest = true;
  }
  fi.src_addr = copy_address(src);
  fi.src_addrlen = sizeof src;
  if (!fi.src_addr) return -FI_ENOMEM;
  if (have_dest) {
    fi.dest_addr = copy_address(dest);
    fi.dest_addrlen = sizeof dest;
    if (!fi.dest_addr) return -FI_ENOMEM;
  }
  return 0;
}

}  // namespace

int getinfo(std::uint32_t version, const char* node, const char* service, std::uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  if (!info) return -FI_EINVAL;
  *info = nullptr;
  if (!check_hints(hints)) return -FI_ENODATA;
  proto::protocol_family family;
  if (!params_protocol(family)) return -FI_ENODATA;  // a misspelt variant must not run as write
  const proto::config cfg = params_read();
  fi_info* fi = fi_allocinfo();
  if (!fi) return -FI_ENOMEM;
  int rc = fill(version, hints, cfg, *fi);
  if (rc == 0) rc = set_addresses(node, service, flags, hints, cfg, *fi);
  if (rc != 0) {
    fi_freeinfo(fi);
    return rc;
  }
  *info = fi;
  return 0;
}

}  // namespace exanet::fi
