// SPDX-License-Identifier: BSD-2-Clause
// fi_getinfo: filter by the hints, then build one fi_info that echoes what the application asked
// for. Every rejection is -FI_ENODATA, the answer that makes libfabric try other providers and
// fabtests report "not run" rather than "failed", and each says why at FI_LOG_INFO
// (FI_LOG_LEVEL=info FI_LOG_PROV=exanet), naming what was asked and what exanet offers.
#include <rdma/fi_errno.h>

#include <netdb.h>
#include <sys/socket.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/log.hpp"
#include "dev/address.hpp"
#include "fi/addr_format.hpp"
#include "fi/attr.hpp"
#include "fi/params.hpp"
#include "fi/provider.hpp"

namespace exanet::fi {
namespace {

// ---- hint checks --------------------------------------------------------------------------

/// Logs one refusal at FI_LOG_INFO and returns false.
[[gnu::format(printf, 1, 2)]] bool refuse(const char* fmt, ...) noexcept {
  if (core::log_enabled(core::log_level::info, core::log_subsys::core)) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    core::log_write(core::log_level::info, core::log_subsys::core, "fi_getinfo", __LINE__,
                    "no match: %s", text);
  }
  return false;
}

/// want must be a subset of have; otherwise logs what was asked and what exanet has.
bool subset(const char* what, std::uint64_t want, std::uint64_t have, int type) noexcept {
  if ((want & ~have) == 0) return true;
  const std::uint64_t extra = want & ~have;
  char a[256], b[256];
  fi_tostr_r(a, sizeof a, &extra, static_cast<fi_type>(type));
  fi_tostr_r(b, sizeof b, &have, static_cast<fi_type>(type));
  return refuse("unsupported %s: requested %s, supported %s", what, a, b);
}

bool at_most(const char* what, std::size_t want, std::size_t have) noexcept {
  if (want <= have) return true;
  return refuse("%s %zu requested, at most %zu supported", what, want, have);
}

bool check_tx(const fi_tx_attr* a, const proto::config& cfg) noexcept {
  if (!a) return true;
  return subset("tx_attr->caps", a->caps, tx_caps, FI_TYPE_CAPS) &&
         subset("tx_attr->op_flags", a->op_flags, tx_op_flags_supported, FI_TYPE_OP_FLAGS) &&
         subset("tx_attr->msg_order", a->msg_order, msg_order_supported, FI_TYPE_MSG_ORDER) &&
         subset("tx_attr->comp_order", a->comp_order, FI_ORDER_NONE, FI_TYPE_MSG_ORDER) &&
         at_most("tx_attr->iov_limit", a->iov_limit, cfg.iov_limit) &&
         at_most("tx_attr->rma_iov_limit", a->rma_iov_limit, cfg.iov_limit) &&
         at_most("tx_attr->size", a->size, max_queue_size);
}

bool check_rx(const fi_rx_attr* a, const proto::config& cfg) noexcept {
  if (!a) return true;
  return subset("rx_attr->caps", a->caps, rx_caps, FI_TYPE_CAPS) &&
         subset("rx_attr->op_flags", a->op_flags, rx_op_flags_supported, FI_TYPE_OP_FLAGS) &&
         subset("rx_attr->msg_order", a->msg_order, msg_order_supported, FI_TYPE_MSG_ORDER) &&
         subset("rx_attr->comp_order", a->comp_order, FI_ORDER_NONE, FI_TYPE_MSG_ORDER) &&
         at_most("rx_attr->iov_limit", a->iov_limit, cfg.iov_limit) &&
         at_most("rx_attr->total_buffered_recv", a->total_buffered_recv, 0) &&
         at_most("rx_attr->size", a->size, max_queue_size);
}

bool check_domain(const fi_domain_attr* d) noexcept {
  if (!d) return true;
  if (d->name && std::strcmp(d->name, domain_name) != 0)
    return refuse("domain name \"%s\" requested, exanet's is \"%s\"", d->name, domain_name);
  // Both progress models are offered, per field (fi_exanet(7), PROGRESS).
  // Read as integers: an application may pass any value, and loading one that names no
  // enumerator through the enum type is undefined behaviour in C++ (UBSan stops there).
  int asked[2];
  std::memcpy(&asked[0], &d->control_progress, sizeof asked[0]);
  std::memcpy(&asked[1], &d->data_progress, sizeof asked[1]);
  static_assert(sizeof(fi_progress) == sizeof(int));
  for (const int p : asked)
    if (p != FI_PROGRESS_UNSPEC && p != FI_PROGRESS_AUTO && p != FI_PROGRESS_MANUAL)
      return refuse("progress model %d requested, FI_PROGRESS_AUTO and FI_PROGRESS_MANUAL "
                    "supported", p);
  if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE)
    return refuse("av_type %d requested, FI_AV_MAP and FI_AV_TABLE supported", d->av_type);
  if (d->max_ep_stx_ctx > 0 || d->max_ep_srx_ctx > 0)
    return refuse("shared contexts requested, not supported");
  return at_most("domain_attr->cq_data_size", d->cq_data_size, cq_data_size) &&
         at_most("domain_attr->max_ep_tx_ctx", d->max_ep_tx_ctx, 1) &&
         at_most("domain_attr->max_ep_rx_ctx", d->max_ep_rx_ctx, 1) &&
         at_most("domain_attr->mr_iov_limit", d->mr_iov_limit, mr_iov_limit) &&
         subset("domain_attr->caps", d->caps, domain_caps, FI_TYPE_CAPS);
}

bool check_ep(const fi_ep_attr* e) noexcept {
  if (!e) return true;
  if (e->type != FI_EP_UNSPEC && e->type != FI_EP_RDM) {
    char t[64];
    fi_tostr_r(t, sizeof t, &e->type, FI_TYPE_EP_TYPE);
    return refuse("endpoint type %s requested, only FI_EP_RDM supported", t);
  }
  if (e->protocol != FI_PROTO_UNSPEC) return refuse("ep_attr->protocol %u requested", e->protocol);
  if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1)
    return refuse("scalable endpoints requested (%zu tx, %zu rx contexts), not supported",
                  e->tx_ctx_cnt, e->rx_ctx_cnt);
  if (e->auth_key_size) return refuse("authorization keys requested, not supported");
  return at_most("ep_attr->max_msg_size", e->max_msg_size, max_msg_size);
}

bool check_fabric(const fi_fabric_attr* f) noexcept {
  if (!f) return true;
  if (f->name && std::strcmp(f->name, fabric_name) != 0)
    return refuse("fabric name \"%s\" requested, exanet's is \"%s\"", f->name, fabric_name);
  if (f->prov_name && std::strcmp(f->prov_name, provider_name) != 0)
    return refuse("provider \"%s\" requested", f->prov_name);
  if (f->prov_version > provider_version) return refuse("a newer provider version requested");
  return true;
}

bool check_hints(const fi_info* h, const proto::config& cfg) noexcept {
  if (!h) return true;
  if (!subset("caps", h->caps, all_caps, FI_TYPE_CAPS)) return false;
  if (!addr_format_supported(h->addr_format)) {
    char f[64];
    fi_tostr_r(f, sizeof f, &h->addr_format, FI_TYPE_ADDR_FORMAT);
    return refuse("address format %s requested; FI_FORMAT_UNSPEC (exanet's own), FI_SOCKADDR, "
                  "FI_SOCKADDR_IN, FI_SOCKADDR_IN6 and FI_ADDR_STR supported", f);
  }
  return check_tx(h->tx_attr, cfg) && check_rx(h->rx_attr, cfg) && check_ep(h->ep_attr) &&
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

  fi_tx_attr& tx = *fi.tx_attr;
  tx.caps = caps & tx_caps;
  tx.mode = 0;
  tx.op_flags = h && h->tx_attr ? h->tx_attr->op_flags : 0;
  tx.msg_order = msg_order_supported;
  tx.comp_order = FI_ORDER_NONE;
  tx.inject_size = cfg.inject_size;
  if (h && h->tx_attr && h->tx_attr->inject_size && h->tx_attr->inject_size < tx.inject_size)
    tx.inject_size = h->tx_attr->inject_size;
  // Sizes: at least what was asked (check_tx refused more than max_queue_size), else the default.
  tx.size = h && h->tx_attr && h->tx_attr->size > cfg.tx_size ? h->tx_attr->size : cfg.tx_size;
  tx.iov_limit = h && h->tx_attr && h->tx_attr->iov_limit ? h->tx_attr->iov_limit : cfg.iov_limit;
  tx.rma_iov_limit = h && h->tx_attr && h->tx_attr->rma_iov_limit ? h->tx_attr->rma_iov_limit
                                                                  : cfg.iov_limit;

  fi_rx_attr& rx = *fi.rx_attr;
  rx.caps = caps & rx_caps;
  rx.mode = 0;
  rx.op_flags = h && h->rx_attr ? h->rx_attr->op_flags : 0;
  rx.msg_order = msg_order_supported;
  rx.comp_order = FI_ORDER_NONE;
  rx.total_buffered_recv = 0;
  rx.size = h && h->rx_attr && h->rx_attr->size > cfg.rx_size ? h->rx_attr->size : cfg.rx_size;
  rx.iov_limit = h && h->rx_attr && h->rx_attr->iov_limit ? h->rx_attr->iov_limit : cfg.iov_limit;

  fi_ep_attr& ep = *fi.ep_attr;
  ep.type = FI_EP_RDM;
  ep.protocol = FI_PROTO_UNSPEC;
  ep.protocol_version = 1;
  ep.max_msg_size = max_msg_size;
  ep.msg_prefix_size = 0;
  ep.max_order_raw_size = ep.max_order_war_size = ep.max_order_waw_size =
      (caps & FI_ATOMIC) ? max_order_atomic_size : 0;
  ep.mem_tag_format = mem_tag_format;
  ep.tx_ctx_cnt = ep.rx_ctx_cnt = 1;
  ep.auth_key_size = 0;

  fi_domain_attr& d = *fi.domain_attr;
  const fi_domain_attr* hd = h ? h->domain_attr : nullptr;
  d.name = strdup(domain_name);
  d.threading = hd && hd->threading != FI_THREAD_UNSPEC ? hd->threading : FI_THREAD_SAFE;
  // Each field echoes the hint; unset, FI_EXANET_PROGRESS decides (manual by default: MPI
  // libraries drive progress themselves and need no thread). As in tcp;ofi_rxm, the two are
  // independent: data FI_PROGRESS_AUTO starts the domain's progress thread, and control
  // operations complete within their calls under either model.
  const fi_progress unset = params_auto_progress() ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
  d.control_progress = hd && hd->control_progress != FI_PROGRESS_UNSPEC ? hd->control_progress : unset;
  d.data_progress = hd && hd->data_progress != FI_PROGRESS_UNSPEC ? hd->data_progress : unset;
  d.resource_mgmt = hd && hd->resource_mgmt != FI_RM_UNSPEC ? hd->resource_mgmt : FI_RM_ENABLED;
  d.av_type = hd ? hd->av_type : FI_AV_UNSPEC;
  // Each mr_mode bit is a restriction the provider imposes (fi_mr(3): PROV_KEY "does not support
  // application requested keys", VIRT_ADDR "must be the virtual address", ENDPOINT "registration
  // occurs at the endpoint"). exanet imposes none, so it clears every bit the application
  // offered: user keys, offsets into the region, domain-wide registrations, no local ones.
  // Before API 1.5 the field could only say FI_MR_BASIC or FI_MR_SCALABLE, and BASIC is honoured.
  const int asked_mr = hd ? hd->mr_mode : 0;
  if (FI_VERSION_LT(version, FI_VERSION(1, 5)) || asked_mr == FI_MR_BASIC ||
      asked_mr == FI_MR_SCALABLE)
    d.mr_mode = asked_mr == FI_MR_BASIC ? FI_MR_BASIC : FI_MR_SCALABLE;
  else
    d.mr_mode = 0;
  d.mr_key_size = 8;
  d.cq_data_size = cq_data_size;
  d.cq_cnt = 1024;
  d.ep_cnt = 1024;
  d.tx_ctx_cnt = d.rx_ctx_cnt = 1024;
  d.max_ep_tx_ctx = d.max_ep_rx_ctx = 1;
  d.max_ep_stx_ctx = d.max_ep_srx_ctx = 0;
  d.cntr_cnt = 1024;
  d.mr_iov_limit = mr_iov_limit;
  d.caps = domain_caps;
  d.mode = 0;
  d.max_err_data = 64;
  d.mr_cnt = cfg.mr_keys;  // one protection-table entry per registration and endpoint

  fi_fabric_attr& f = *fi.fabric_attr;
  f.name = strdup(fabric_name);
  f.prov_name = nullptr;  // the core fills it; a value here would read "exanet;exanet"
  f.prov_version = provider_version;
  return d.name && f.name ? 0 : -FI_ENOMEM;
}

/// The host part of the answer's names: the source address the application gave, or node when
/// it is a numeric address (of this host: set_addresses refuses others).
addr_codec answer_codec(const char* node, const fi_info* h, const proto::config& cfg) noexcept {
  const std::uint32_t format = h ? h->addr_format : std::uint32_t{FI_FORMAT_UNSPEC};
  if (h && h->src_addr) return addr_codec_for(format, h->src_addr, h->src_addrlen, cfg);
  if (h && h->dest_addr && !node) return addr_codec_for(format, h->dest_addr, h->dest_addrlen, cfg);
  sockaddr_storage ss{};
  if (node && (format == FI_SOCKADDR || format == FI_SOCKADDR_IN || format == FI_SOCKADDR_IN6 ||
               format == FI_ADDR_STR)) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_family = format == FI_SOCKADDR_IN    ? AF_INET
                      : format == FI_SOCKADDR_IN6 ? AF_INET6
                                                  : AF_UNSPEC;
    if (getaddrinfo(node, nullptr, &hints, &res) == 0 && res) {
      std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
      const std::size_t len = res->ai_addrlen;
      freeaddrinfo(res);
      return addr_codec_for(format, &ss, len, cfg);
    }
  }
  return addr_codec_for(format, nullptr, 0, cfg);
}

int put_name(const addr_codec& c, const dev::address& a, void*& out, std::size_t& out_len) noexcept {
  std::size_t len = 0;
  (void)addr_encode(c, a, nullptr, &len);
  out = std::malloc(len);  // freed by fi_freeinfo
  if (!out) return -FI_ENOMEM;
  out_len = len;
  return addr_encode(c, a, out, &out_len);
}

int set_addresses(const char* node, const char* service, std::uint64_t flags, const fi_info* h,
                  const proto::config& cfg, fi_info& fi) noexcept {
  const addr_codec c = answer_codec(node, h, cfg);
  fi.addr_format = c.format;
  dev::address src{};
  src.node = cfg.node;
  src.pdid = cfg.pdid;
  dev::address dest = src;
  bool have_dest = false;

  if (node || service) {
    dev::address a;
    if (int rc = addr_from_node_service(c, node, service, a); rc != 0)
      return refuse("node \"%s\" service \"%s\": %s", node ? node : "", service ? service : "",
                    rc == -FI_EADDRNOTAVAIL ? "not this host, and the network backend is off "
                                              "(FI_EXANET_NETWORK)"
                                            : "not an exanet endpoint"),
             -FI_ENODATA;
    if (flags & FI_SOURCE) {
      if (a.host == dev::unknown_host)
        return refuse("node \"%s\": not this host, and an endpoint opens on this host",
                      node ? node : ""), -FI_ENODATA;
      src = a;
    } else {
      dest = a;
      have_dest = true;
    }
  }
  if (h && h->src_addr) {
    if (addr_decode(c, h->src_addr, h->src_addrlen, src, port_any::allowed) != 0 ||
        src.host == dev::unknown_host)
      return refuse("hints->src_addr is not an address of an endpoint of this host"), -FI_ENODATA;
  }
  if (h && h->dest_addr) {
    if (addr_decode(c, h->dest_addr, h->dest_addrlen, dest) != 0)
      return refuse("hints->dest_addr is not an address of an endpoint of this host"), -FI_ENODATA;
    have_dest = true;
  }
  // With the network backend on, an endpoint's name is version 2 (dev/hybrid): the source name
  // has the most fi_getname will give (64 bytes; 32 when the lower provider's name turns out an
  // IPv4 address, which only the open endpoint knows). What only the open endpoint knows (its
  // host, its incarnation, the lower provider's name) stays 0 here.
  if (cfg.network != dev::open_params::network::use::off && src.version == 1) src.version = 2;
  if (int rc = put_name(c, src, fi.src_addr, fi.src_addrlen); rc != 0) return rc;
  if (have_dest)
    if (int rc = put_name(c, dest, fi.dest_addr, fi.dest_addrlen); rc != 0) return rc;
  return 0;
}

}  // namespace

int getinfo(std::uint32_t version, const char* node, const char* service, std::uint64_t flags,
            const fi_info* hints, fi_info** info) noexcept {
  if (!info) return -FI_EINVAL;
  *info = nullptr;
  proto::protocol_family family;
  if (!params_protocol(family))  // a misspelt variant must not run as write
    return refuse("FI_EXANET_PROTOCOL names no protocol variant (write, read, optimistic)"),
           -FI_ENODATA;
  const proto::config cfg = params_read();
  if (!check_hints(hints, cfg)) return -FI_ENODATA;
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
