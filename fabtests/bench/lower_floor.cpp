// SPDX-License-Identifier: BSD-2-Clause
// The floor under exanet's large messages over the network backend, measured on its lower
// provider alone (libfabric, no exanet): for each size, a ping-pong of
//   msg           one tagged message of the size, receive posted first (what tcp;ofi_rxm's own
//                 message costs: the series "tcp" of net_compare.sh);
//   inject        the same message sent with fi_tinject (no completion; at most the provider's
//                 inject_size, 64 B for tcp;ofi_rxm): what Open MPI's mtl ofi does at or below
//                 inject_size, and how dev/net sends a lone mailbox packet (fi_injectdata);
//   bundle        the shape dev/net gives a medium message: one untagged fi_sendmsg of three
//                 iovecs (a 64-byte header, the size's bytes, a 64-byte packet) with remote CQ
//                 data and a completion, into an untagged receive;
//   bundle1       the same bytes as one iovec (is it the iovecs, or the untagged send?);
//   write_notify  one RMA write of the size (FI_DELIVERY_COMPLETE, as dev/net writes) followed at
//                 once by a 64-byte message, the notification, which the peer waits for (what
//                 exanet's receiver-initiated rendezvous does once the RTR is there: dev/net's
//                 dma_post with notify_ahead);
//   write_dc      the same, the notification sent only once the write's delivery completion
//                 came back (dev/net without notify_ahead; RMA writes through a key);
//   write_tc      write_notify with FI_TRANSMIT_COMPLETE (what the delivery verdict costs);
//   write_data    one RMA write with remote CQ data (FI_REMOTE_CQ_DATA) and no message: the peer
//                 waits for the write's own completion (what a notification carried by the
//                 write would cost);
//   stream_msg    streaming, as net_compare.sh's bandwidth mode: a window of 64 tagged messages
//                 one way, all 64 receives posted first, then a 64-byte message back;
//   stream_write  the same window as 64 RMA writes (FI_DELIVERY_COMPLETE) each followed at once
//                 by its 64-byte notification message (exanet's receiver-initiated stream); the
//                 peer waits for the 64 notifications.
//   stream_write_tc    stream_write with FI_TRANSMIT_COMPLETE writes (what the verdict costs);
//   stream_write_data  64 RMA writes with remote CQ data and no message, the peer waiting for
//                 the 64 writes' own completions (what a notification carried by the write
//                 would give a stream).
// One way = half a round trip; the value is the median of 5 blocks. If write_notify alone is
// not below 0.9 x msg, exanet cannot be either over this lower provider. The stream modes print
// MB/s (10^6 B/s) instead: a window's bytes over its time, as net_compare.sh's bandwidth.
// A benchmark tool, not a test: it judges nothing.
//
//   lower_floor serve FILE NODE      one end, bound to NODE; writes what the other needs to FILE
//   lower_floor client FILE NODE     the other end; prints one line per size and mode
// Environment: FLOOR_SIZES (bytes, default "65536 1048576 4194304"), FLOOR_PROV (default tcp),
// FLOOR_MODES (default "msg write_notify write_dc"; "inject", "bundle", "bundle1", "write_tc",
// "write_data", "stream_msg", "stream_write", "stream_write_tc", "stream_write_data" on
// request).
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int blocks = 5;
constexpr std::uint64_t tag_data = 1, tag_notify = 2, tag_hello = 3;
constexpr std::size_t max_size = std::size_t{4} << 20;
constexpr int stream_window = 64;

[[noreturn]] void die(const char* what, long rc) {
  std::fprintf(stderr, "lower_floor: %s: %ld (%s)\n", what, rc, fi_strerror(int(-rc)));
  std::exit(2);
}
#define CHECK(call)                                  \
  do {                                               \
    const long rc_ = long(call);                     \
    if (rc_ < 0) die(#call, rc_);                    \
  } while (0)

double now_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

// What one end tells the other: its lower name and where its RMA target buffer is.
struct card {
  std::uint64_t va = 0, key = 0;
  std::uint32_t name_len = 0;
  char name[64] = {};
};

enum op { op_send, op_recv_data, op_recv_notify, op_write, op_remote_write, op_count };

struct end {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* mr = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  card peer_card;
  std::vector<char> target, source, recv_buf;
  char notify_out[64] = {}, notify_in[64] = {};
  fi_context2 ctx[op_count]{};
  long done[op_count] = {};
  long posted_sends = 0, posted_writes = 0;

  void open(const char* node, const char* prov) {
    fi_info* h = fi_allocinfo();
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
    h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_ENDPOINT;  // as dev/net
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
    h->rx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_SAW;
    h->fabric_attr->prov_name = strdup(prov);
    CHECK(fi_getinfo(FI_VERSION(1, 17), node, nullptr, FI_SOURCE, h, &info));
    fi_freeinfo(h);
    CHECK(fi_fabric(info->fabric_attr, &fabric, nullptr));
    CHECK(fi_domain(fabric, info, &domain, nullptr));
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 1024;
    CHECK(fi_cq_open(domain, &ca, &cq, nullptr));
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    CHECK(fi_av_open(domain, &aa, &av, nullptr));
    CHECK(fi_endpoint(domain, info, &ep, nullptr));
    CHECK(fi_ep_bind(ep, &av->fid, 0));
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CHECK(fi_enable(ep));
    target.assign(max_size, 0);
    source.assign(max_size + 128, 'x');  // + a bundle's header and packet
    recv_buf.assign(max_size + 128, 0);
    CHECK(fi_mr_reg(domain, target.data(), target.size(), FI_REMOTE_WRITE, 0, 1, 0, &mr, nullptr));
    if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      CHECK(fi_mr_bind(mr, &ep->fid, 0));
      CHECK(fi_mr_enable(mr));
    }
  }

  card my_card() {
    card c;
    c.va = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? std::uint64_t(std::uintptr_t(target.data())) : 0;
    c.key = fi_mr_key(mr);
    size_t len = sizeof c.name;
    CHECK(fi_getname(&ep->fid, c.name, &len));
    c.name_len = std::uint32_t(len);
    return c;
  }

  void add_peer(const card& c) {
    peer_card = c;
    if (fi_av_insert(av, c.name, 1, &peer, 0, nullptr) != 1) die("fi_av_insert", -FI_EINVAL);
  }

  void progress() {
    fi_cq_tagged_entry e[8];
    const ssize_t n = fi_cq_read(cq, e, 8);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq, &err, 0);
      die("completion error", -err.err);
    }
    if (n < 0 && n != -FI_EAGAIN) die("fi_cq_read", n);
    for (ssize_t i = 0; i < n; ++i) {
      if ((e[i].flags & FI_REMOTE_WRITE) && (e[i].flags & FI_REMOTE_CQ_DATA)) {
        ++done[op_remote_write];
        continue;
      }
      for (int k = 0; k < op_count; ++k)
        if (e[i].op_context == &ctx[k]) ++done[k];
    }
  }
  void wait(op k, long count) {
    while (done[k] < count) progress();
  }
  template <class F>
  void retry(F post) {
    ssize_t rc;
    while ((rc = post()) == -FI_EAGAIN) progress();
    if (rc < 0) die("post", rc);
  }

  void post_recv(op k, std::size_t size) {
    void* buf = k == op_recv_data ? static_cast<void*>(recv_buf.data()) : notify_in;
    const std::uint64_t tag = k == op_recv_data ? tag_data : tag_notify;
    retry([&] { return fi_trecv(ep, buf, size, nullptr, peer, tag, 0, &ctx[k]); });
  }
  void send(std::size_t size) {
    retry([&] { return fi_tsend(ep, source.data(), size, nullptr, peer, tag_data, &ctx[op_send]); });
  }
  void inject(std::size_t size) {
    retry([&] { return fi_tinject(ep, source.data(), size, peer, tag_data); });
  }
  void bundle(std::size_t size, bool split) {
    iovec v[3] = {{notify_out, sizeof notify_out}, {source.data(), size}, {notify_out, sizeof notify_out}};
    if (!split) v[0] = {source.data(), size + 2 * sizeof notify_out};
    fi_msg m{};
    m.msg_iov = v;
    m.iov_count = split ? 3 : 1;
    m.addr = peer;
    m.context = &ctx[op_send];
    m.data = 1;
    retry([&] { return fi_sendmsg(ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA); });
  }
  void post_bundle_recv(std::size_t size) {
    retry([&] {
      return fi_recv(ep, recv_buf.data(), size + 2 * sizeof notify_out, nullptr, peer,
                     &ctx[op_recv_data]);
    });
  }
  void notify() {
    retry([&] {
      return fi_tsend(ep, notify_out, sizeof notify_out, nullptr, peer, tag_notify, &ctx[op_send]);
    });
  }
  void write(std::size_t size, std::uint64_t completion = FI_DELIVERY_COMPLETE,
             bool with_data = false) {
    iovec local{source.data(), size};
    fi_rma_iov remote{peer_card.va, size, peer_card.key};
    fi_msg_rma m{};
    m.msg_iov = &local;
    m.iov_count = 1;
    m.addr = peer;
    m.rma_iov = &remote;
    m.rma_iov_count = 1;
    m.context = &ctx[op_write];
    m.data = 1;
    retry([&] {
      return fi_writemsg(ep, &m, FI_COMPLETION | completion | (with_data ? FI_REMOTE_CQ_DATA : 0));
    });
  }
};

// One trip in the given mode, from this end to the other (the receiving side's part is `take`).
void give(end& e, const std::string& mode, std::size_t size) {
  if (mode == "msg") {
    e.send(size);
    ++e.posted_sends;
  } else if (mode == "inject") {
    e.inject(size);  // no completion to count
  } else if (mode == "bundle" || mode == "bundle1") {
    e.bundle(size, mode == "bundle");
    ++e.posted_sends;
  } else if (mode == "write_data") {
    e.write(size, FI_DELIVERY_COMPLETE, true);  // the write is its own notification
    ++e.posted_writes;
  } else {
    e.write(size, mode == "write_tc" ? FI_TRANSMIT_COMPLETE : FI_DELIVERY_COMPLETE);
    ++e.posted_writes;
    if (mode == "write_dc") e.wait(op_write, e.posted_writes);
    e.notify();
    ++e.posted_sends;
  }
}
// The receive of one trip; the next one's is posted before anything is sent (unless `last`).
// A notification receive is always left posted: it also serves the handshake of the next cell.
void take(end& e, const std::string& mode, std::size_t size, bool last) {
  const bool bundled = mode == "bundle" || mode == "bundle1";
  if (mode == "write_data") {
    e.wait(op_remote_write, e.done[op_remote_write] + 1);
    return;
  }
  const op k = mode == "msg" || mode == "inject" || bundled ? op_recv_data : op_recv_notify;
  e.wait(k, e.done[k] + 1);
  if (k == op_recv_notify) e.post_recv(k, 64);
  else if (!last && bundled) e.post_bundle_recv(size);
  else if (!last) e.post_recv(k, size);
}

int iterations(std::size_t size) {
  return size >= (std::size_t{1} << 20) ? int(std::max<std::size_t>(6, (32u << 20) / size)) : 100;
}

bool streaming(const std::string& mode) { return mode.rfind("stream_", 0) == 0; }

// One window of a stream, from the leader to the follower, and the follower's 64-byte answer.
// Every message of a window lands in the same receive buffer and every write at the same
// target, as osu-style bandwidth programs reuse theirs.
void stream_window_trip(end& e, bool leader, const std::string& mode, std::size_t size, bool last) {
  if (leader) {
    for (int i = 0; i < stream_window; ++i) {
      if (mode == "stream_msg") {
        e.send(size);
        ++e.posted_sends;
      } else if (mode == "stream_write_data") {
        e.write(size, FI_DELIVERY_COMPLETE, true);  // the write is its own notification
        ++e.posted_writes;
      } else {
        e.write(size, mode == "stream_write_tc" ? FI_TRANSMIT_COMPLETE : FI_DELIVERY_COMPLETE);
        ++e.posted_writes;
        e.notify();
        ++e.posted_sends;
      }
    }
    e.wait(op_recv_notify, e.done[op_recv_notify] + 1);  // the answer
    e.post_recv(op_recv_notify, 64);
    return;
  }
  if (mode == "stream_msg") {
    e.wait(op_recv_data, e.done[op_recv_data] + stream_window);
    if (!last)
      for (int i = 0; i < stream_window; ++i) e.post_recv(op_recv_data, size);
  } else if (mode == "stream_write_data") {
    e.wait(op_remote_write, e.done[op_remote_write] + stream_window);
  } else {
    for (int i = 0; i < stream_window; ++i) {
      e.wait(op_recv_notify, e.done[op_recv_notify] + 1);
      e.post_recv(op_recv_notify, 64);
    }
  }
  e.notify();  // the answer
  ++e.posted_sends;
}

void run(end& e, bool leader, const std::vector<std::size_t>& sizes,
         const std::vector<std::string>& modes) {
  e.post_recv(op_recv_notify, 64);
  for (const std::size_t size : sizes) {
    for (const std::string& mode : modes) {
      if (mode == "msg" || mode == "inject") e.post_recv(op_recv_data, size);
      if (mode == "stream_msg" && !leader)
        for (int i = 0; i < stream_window; ++i) e.post_recv(op_recv_data, size);
      if (mode == "bundle" || mode == "bundle1") e.post_bundle_recv(size);
      // Both ends have their receives posted before the first trip: a notification each way.
      for (int turn = 0; turn < 2; ++turn) {
        if ((turn == 0) == leader) {
          e.notify();
          ++e.posted_sends;
        } else {
          e.wait(op_recv_notify, e.done[op_recv_notify] + 1);
          e.post_recv(op_recv_notify, 64);
        }
      }
      const bool stream = streaming(mode);
      // A window moves 64 messages: as many bytes per block as about 64 trips of the others.
      const int n = stream ? std::max(2, iterations(size) / stream_window * 2) : iterations(size);
      std::vector<double> one_way;
      for (int b = 0; b <= blocks; ++b) {  // block 0 warms up
        const double t0 = now_us();
        for (int i = 0; i < n; ++i) {
          const bool last = b == blocks && i == n - 1;
          if (stream) {
            stream_window_trip(e, leader, mode, size, last);
          } else if (leader) {
            give(e, mode, size);
            take(e, mode, size, last);
          } else {
            take(e, mode, size, last);
            give(e, mode, size);
          }
        }
        // Streams: MB/s of the window's bytes (larger is better), the others: us one way.
        if (b > 0)
          one_way.push_back(stream ? double(size) * stream_window * n / (now_us() - t0)
                                   : (now_us() - t0) / n / 2);
      }
      e.wait(op_write, e.posted_writes);  // every write and send done before the next cell
      e.wait(op_send, e.posted_sends);
      std::sort(one_way.begin(), one_way.end());
      if (leader && stream)
        std::printf("%-12s %8zu B  %9.1f MB/s (worst %.1f, best %.1f; %d windows of %d x %d)\n",
                    mode.c_str(), size, one_way[blocks / 2], one_way.front(), one_way.back(), n,
                    stream_window, blocks);
      else if (leader)
        std::printf("%-12s %8zu B  %9.2f us one way (best %.2f, worst %.2f; %d trips x %d)\n",
                    mode.c_str(), size, one_way[blocks / 2], one_way.front(), one_way.back(), n,
                    blocks);
      std::fflush(stdout);
    }
  }
}

card read_card(const std::string& file) {
  card c;
  for (int i = 0; i < 1500; ++i) {
    std::ifstream in(file, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&c), sizeof c)) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "lower_floor: nothing in %s\n", file.c_str());
  std::exit(2);
}

std::vector<std::string> words(const char* env, const char* dflt) {
  const char* v = std::getenv(env);
  std::istringstream in(v && *v ? v : dflt);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  alarm(600);
  if (argc < 4 || (std::strcmp(argv[1], "serve") != 0 && std::strcmp(argv[1], "client") != 0)) {
    std::fprintf(stderr, "usage: %s serve|client FILE NODE\n", argv[0]);
    return 2;
  }
  const bool leader = std::strcmp(argv[1], "client") == 0;
  std::vector<std::size_t> sizes;
  for (const std::string& w : words("FLOOR_SIZES", "65536 1048576 4194304")) {
    const std::size_t s = std::strtoull(w.c_str(), nullptr, 10);
    if (s == 0 || s > max_size) {
      std::fprintf(stderr, "lower_floor: size %s not in 1..%zu\n", w.c_str(), max_size);
      return 2;
    }
    sizes.push_back(s);
  }
  const std::vector<std::string> modes = words("FLOOR_MODES", "msg write_notify write_dc");
  for (const std::string& m : modes)
    if (m != "msg" && m != "inject" && m != "bundle" && m != "bundle1" && m != "write_notify" &&
        m != "write_dc" && m != "write_tc" && m != "write_data" && !streaming(m)) {
      std::fprintf(stderr, "lower_floor: unknown mode %s\n", m.c_str());
      return 2;
    }
  const char* prov = std::getenv("FLOOR_PROV");
  end e;
  e.open(argv[3], prov && *prov ? prov : "tcp");
  // fi_tinject is defined only up to inject_size (a provider may take more, as rxm does, but a
  // figure beyond it measures nothing a program may rely on).
  if (std::find(modes.begin(), modes.end(), "inject") != modes.end())
    for (const std::size_t s : sizes)
      if (s > e.info->tx_attr->inject_size) {
        std::fprintf(stderr, "lower_floor: inject of %zu bytes is beyond inject_size %zu\n", s,
                     e.info->tx_attr->inject_size);
        return 2;
      }
  card mine = e.my_card();
  if (!leader) {
    const std::string tmp = std::string(argv[2]) + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&mine), sizeof mine);
    std::rename(tmp.c_str(), argv[2]);
    // The leader's card comes as the first message.
    card theirs;
    e.retry([&] {
      return fi_trecv(e.ep, &theirs, sizeof theirs, nullptr, FI_ADDR_UNSPEC, tag_hello, 0,
                      &e.ctx[op_recv_data]);
    });
    e.wait(op_recv_data, 1);
    e.done[op_recv_data] = 0;
    e.add_peer(theirs);
  } else {
    e.add_peer(read_card(argv[2]));
    e.retry([&] {
      return fi_tsend(e.ep, &mine, sizeof mine, nullptr, e.peer, tag_hello, &e.ctx[op_send]);
    });
    e.wait(op_send, 1);
    e.done[op_send] = 0;
    std::printf("# lower_floor over %s\n", e.info->fabric_attr->prov_name);
  }
  run(e, leader, sizes, modes);
  // Let the last trip's completions settle before closing.
  const double end_at = now_us() + 300e3;
  while (now_us() < end_at) e.progress();
  return 0;
}
