// SPDX-License-Identifier: BSD-2-Clause
// exanet-stats: the counters of exanet endpoints, live or as printed at close.
//
//   exanet-stats FILE...          the "exanet-stats key=value ..." lines in FILEs ("-": stdin)
//   exanet-stats -- COMMAND...    runs COMMAND with FI_EXANET_STATS pointing at a temporary file
//                                 (exported to every process it starts, mpirun ranks included),
//                                 then tabulates what its endpoints printed
//   exanet-stats top [-i SECONDS] [-n COUNT]   (or --watch) a table of this user's endpoints on
//                                 this host, refreshed from their live files
//   exanet-stats --json | --csv   the same, once, for programs
//   exanet-stats record [-i SECONDS] [-n COUNT] FILE   snapshots as JSON Lines appended to FILE
//                                 ("-": stdout) every SECONDS (default 10), at once on SIGUSR1,
//                                 and a last one on SIGINT/SIGTERM
//   exanet-stats segments [--stale]   this user's segments, live files and named AVs, and
//                                 whether their owners live; --stale: only what is left behind
//                                 (exit 1 if anything is)
//   exanet-stats clean            removes the live files of endpoints whose process is gone
//
// The line mode prints every counter summed over the endpoints, the largest single value for
// high-water marks, and the shares a user asks about first: how many received messages found
// their receive already posted, and which protocol carried the messages. The live modes read
// /dev/shm/exanet-stats.<uid>.<pid>.<port> (prov/exanet/src/fi/live_stats.hpp); see
// exanet-stats(1).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dev/emu/layout.hpp"
#include "fi/live_stats.hpp"

namespace {

struct tally {
  std::vector<std::string> order;  // counters in the order endpoints print them
  std::map<std::string, unsigned long long> sum, max;
  unsigned endpoints = 0;
};

void absorb(std::istream& in, tally& t) {
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string first;
    if (!(words >> first) || first != "exanet-stats") continue;
    ++t.endpoints;
    std::string kv;
    while (words >> kv) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = kv.substr(0, eq);
      if (key == "pid" || key == "port") continue;
      const unsigned long long v = std::strtoull(kv.c_str() + eq + 1, nullptr, 10);
      if (!t.sum.count(key)) t.order.push_back(key);
      t.sum[key] += v;
      if (v > t.max[key]) t.max[key] = v;
    }
  }
}

double share(unsigned long long part, unsigned long long whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

int report(const tally& t) {
  if (t.endpoints == 0) {
    std::fprintf(stderr, "exanet-stats: no exanet-stats lines found\n");
    return 1;
  }
  std::printf("%u endpoint(s)\n", t.endpoints);
  std::printf("%-28s %16s\n", "counter", "total");
  for (const std::string& k : t.order) {
    // A high-water mark does not add up across endpoints: show the largest.
    const bool mark = k.size() > 4 && k.compare(k.size() - 4, 4, "_max") == 0;
    std::printf("%-28s %16llu%s\n", k.c_str(), mark ? t.max.at(k) : t.sum.at(k),
                mark ? "  (largest)" : "");
  }
  auto get = [&](const char* k) { return t.sum.count(k) ? t.sum.at(k) : 0ull; };
  const unsigned long long rndv = get("rndv_recv") + get("ri_recv");
  const unsigned long long recvd = get("eager_recv") + get("medium_recv") + rndv;
  if (recvd) {
    std::printf("\nmessages received %llu: eager %.1f%%, medium %.1f%%, rendezvous %.1f%%\n", recvd,
                share(get("eager_recv"), recvd), share(get("medium_recv"), recvd),
                share(rndv, recvd));
    std::printf("fast receives (receive posted before the message arrived): %.1f%%\n",
                share(get("fast_recv"), recvd));
  }
  // The sender's view: an RTR found its send (receiver-initiated), crossed its RTS
  // (concurrent), or no RTR came (sender-initiated: RTS, CTS, write).
  const unsigned long long sent_rndv = get("rndv_sent") + get("ri_sent");
  if (sent_rndv) {
    const unsigned long long concurrent = get("concurrent");
    std::printf("rendezvous sent %llu: receiver-initiated %.1f%%, concurrent %.1f%%, "
                "sender-initiated %.1f%%\n",
                sent_rndv, share(get("ri_sent"), sent_rndv), share(concurrent, sent_rndv),
                share(get("rndv_sent") - concurrent, sent_rndv));
  }
  return 0;
}

int run_and_report(char** argv) {
  char path[] = "/tmp/exanet-stats.XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    std::perror("exanet-stats: mkstemp");
    return 2;
  }
  close(fd);
  setenv("FI_EXANET_STATS", path, 1);
  const pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[0], argv);
    std::perror("exanet-stats: exec");
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  tally t;
  std::ifstream in(path);
  absorb(in, t);
  unlink(path);
  const int rc = report(t);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "exanet-stats: the command failed (status %d)\n", status);
    return 3;
  }
  return rc;
}

// ---- files in /dev/shm ---------------------------------------------------------------------

constexpr const char* shm_dir = "/dev/shm";

enum class owner_state { alive, gone, unknown };

const char* state_name(owner_state s) {
  return s == owner_state::alive ? "alive" : s == owner_state::gone ? "dead" : "unknown";
}

// The creator of a segment or live file holds an exclusive flock(2) on it while it lives: a
// shared lock is granted only once nobody holds that one. Given back at once.
owner_state probe_owner(int fd) {
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
    return owner_state::gone;
  }
  return errno == EWOULDBLOCK ? owner_state::alive : owner_state::unknown;
}

owner_state probe_owner(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return owner_state::unknown;
  const owner_state s = probe_owner(fd);
  close(fd);
  return s;
}

// This user's files in /dev/shm whose names start with prefix + "<uid>.".
std::vector<std::string> shm_files(const std::string& prefix) {
  std::vector<std::string> names;
  const std::string mine = prefix + std::to_string(geteuid()) + ".";
  if (DIR* d = opendir(shm_dir)) {
    while (const dirent* e = readdir(d))
      if (std::strncmp(e->d_name, mine.c_str(), mine.size()) == 0) names.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// ---- live counter files ----------------------------------------------------------------------

namespace live = exanet::fi::live_stats;

struct endpoint_snapshot {
  std::string file;
  int pid = 0;
  unsigned port = 0;
  owner_state owner = owner_state::unknown;
  bool torn = false;  // the writer died in the middle of a copy: values may mix two copies
  std::uint64_t updated_ns = 0, started_ns = 0;
  std::vector<std::pair<std::string, unsigned long long>> values;  // counters, then gauges
  unsigned counters = 0;

  unsigned long long get(const char* name) const {
    for (const auto& [k, v] : values)
      if (k == name) return v;
    return 0;
  }
};

bool read_live(const std::string& name, endpoint_snapshot& out) {
  const std::string path = std::string(shm_dir) + "/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < sizeof(live::file_layout)) {
    close(fd);
    return false;
  }
  void* p = mmap(nullptr, sizeof(live::file_layout), PROT_READ, MAP_SHARED, fd, 0);
  out.owner = probe_owner(fd);
  close(fd);
  if (p == MAP_FAILED) return false;
  const auto& f = *static_cast<const live::file_layout*>(p);
  bool ok = std::atomic_ref<const std::uint32_t>(f.magic).load(std::memory_order_acquire) ==
                live::magic &&
            f.version == live::version && f.counters + f.gauges <= live::max_values;
  if (ok) {
    out.file = name;
    out.pid = f.pid;
    out.port = f.port;
    out.counters = f.counters;
    out.started_ns = f.started_ns;
    const unsigned n = f.counters + f.gauges;
    std::vector<unsigned long long> v(n);
    // Seqlock reader: a whole copy has the same even sequence number before and after.
    for (int attempt = 0;; ++attempt) {
      const std::uint64_t s1 = f.seq.load(std::memory_order_acquire);
      for (unsigned i = 0; i < n; ++i) v[i] = f.values[i].load(std::memory_order_relaxed);
      out.updated_ns = f.updated_ns.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const std::uint64_t s2 = f.seq.load(std::memory_order_relaxed);
      if (s1 == s2 && (s1 & 1) == 0) break;
      if (attempt == 1000) {  // a writer that never finishes: killed mid-copy
        out.torn = true;
        break;
      }
      sched_yield();
    }
    out.values.clear();
    for (unsigned i = 0; i < n; ++i) {
      char nm[live::name_bytes + 1] = {};
      std::memcpy(nm, f.names[i], live::name_bytes);
      out.values.emplace_back(nm, v[i]);
    }
  }
  munmap(p, sizeof(live::file_layout));
  return ok;
}

std::vector<endpoint_snapshot> read_all_live() {
  std::vector<endpoint_snapshot> all;
  for (const std::string& name : shm_files(live::name_prefix)) {
    endpoint_snapshot s;
    if (read_live(name, s)) all.push_back(std::move(s));
  }
  return all;
}

// The columns of the table, the CSV and the JSON summary: what a person watching asks first.
struct column {
  const char* head;
  const char* key;  // JSON/CSV name
  unsigned long long (*value)(const endpoint_snapshot&);
  int width = 8;  // of the table's column (byte counts outgrow the message counts' eight)
};

unsigned long long received(const endpoint_snapshot& s) {
  return s.get("eager_recv") + s.get("train_recv") + s.get("medium_recv") + s.get("rndv_recv") +
         s.get("ri_recv");
}

unsigned long long drops(const endpoint_snapshot& s) {
  unsigned long long d = 0;
  for (const auto& [k, v] : s.values)
    if (k.rfind("drop_", 0) == 0) d += v;
  return d + s.get("psn_window_drops");
}

const column g_columns[] = {
    {"EAGER", "eager",  // in one packet or an eager train
     [](const endpoint_snapshot& s) {
       return s.get("eager_sent") + s.get("eager_recv") + s.get("train_sent") + s.get("train_recv");
     }},
    {"MEDIUM", "medium",
     [](const endpoint_snapshot& s) { return s.get("medium_sent") + s.get("medium_recv"); }},
    {"RI", "ri", [](const endpoint_snapshot& s) { return s.get("ri_sent"); }},
    {"SI", "si",
     [](const endpoint_snapshot& s) {
       return s.get("rndv_sent") - std::min(s.get("rndv_sent"), s.get("concurrent"));
     }},
    {"CONC", "concurrent", [](const endpoint_snapshot& s) { return s.get("concurrent"); }},
    {"FAST%", "fast_recv_pct",
     [](const endpoint_snapshot& s) {
       const unsigned long long r = received(s);
       return r ? 100 * s.get("fast_recv") / r : 0ull;
     }},
    {"STALE", "rtr_stale", [](const endpoint_snapshot& s) { return s.get("rtr_stale"); }},
    {"SUSP", "suspensions", [](const endpoint_snapshot& s) { return s.get("suspensions"); }},
    {"UNEXP", "unexpected_now", [](const endpoint_snapshot& s) { return s.get("unexpected_now"); }},
    {"UXMAX", "unexpected_max", [](const endpoint_snapshot& s) { return s.get("unexpected_max"); }},
    {"UXBYTES", "unexpected_bytes_now",
     [](const endpoint_snapshot& s) { return s.get("unexpected_bytes_now"); }},
    {"MBFULL", "mailbox_full", [](const endpoint_snapshot& s) { return s.get("mailbox_full"); }},
    {"DROPS", "drops", drops},
    {"TXBYTES", "bytes_sent", [](const endpoint_snapshot& s) { return s.get("bytes_sent"); }, 12},
    {"RXBYTES", "bytes_recv", [](const endpoint_snapshot& s) { return s.get("bytes_recv"); }, 12},
};

double age_seconds(const endpoint_snapshot& s) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const double now = static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
  return s.updated_ns ? now - static_cast<double>(s.updated_ns) / 1e9 : 0.0;
}

void print_table(const std::vector<endpoint_snapshot>& all) {
  std::printf("%-8s %-6s %-5s", "PID", "PORT", "OWNER");
  for (const column& c : g_columns) std::printf(" %*s", c.width, c.head);
  std::printf("\n");
  for (const endpoint_snapshot& s : all) {
    std::printf("%-8d %-6u %-5s", s.pid, s.port, state_name(s.owner));
    for (const column& c : g_columns) std::printf(" %*llu", c.width, c.value(s));
    std::printf("%s\n", s.torn ? "  (torn)" : "");
  }
  // Drops by reason, only where there are any: a table of zeros helps nobody.
  for (const endpoint_snapshot& s : all) {
    std::string reasons;
    for (const auto& [k, v] : s.values)
      if (v && (k.rfind("drop_", 0) == 0 || k == "psn_window_drops"))
        reasons += " " + k + "=" + std::to_string(v);
    if (!reasons.empty()) std::printf("drops pid %d port %u:%s\n", s.pid, s.port, reasons.c_str());
  }
}

void json_string(std::FILE* out, const std::string& v) {
  std::fputc('"', out);
  for (const char ch : v) {
    if (ch == '"' || ch == '\\')
      std::fprintf(out, "\\%c", ch);
    else if (static_cast<unsigned char>(ch) < 0x20)
      std::fprintf(out, "\\u%04x", ch);
    else
      std::fputc(ch, out);
  }
  std::fputc('"', out);
}

// The live counters as one JSON document. `head` (may be empty) adds members before
// "endpoints"; one_line writes it on a single line (record's JSON Lines).
void write_json(std::FILE* out, const std::vector<endpoint_snapshot>& all, bool one_line,
                const std::string& head = {}) {
  const char* nl = one_line ? " " : "\n  ";
  const char* nl3 = one_line ? " " : "\n   ";
  std::fprintf(out, "{%s\"endpoints\": [", head.c_str());
  for (std::size_t e = 0; e < all.size(); ++e) {
    const endpoint_snapshot& s = all[e];
    std::fprintf(out,
                 "%s%s{\"pid\": %d, \"port\": %u, \"owner\": \"%s\", \"torn\": %s, "
                 "\"age_seconds\": %.3f, \"file\": ",
                 e ? "," : "", nl, s.pid, s.port, state_name(s.owner), s.torn ? "true" : "false",
                 age_seconds(s));
    json_string(out, s.file);
    std::fprintf(out, ",%s\"summary\": {", nl3);
    for (std::size_t i = 0; i < std::size(g_columns); ++i)
      std::fprintf(out, "%s\"%s\": %llu", i ? ", " : "", g_columns[i].key, g_columns[i].value(s));
    std::fprintf(out, "},%s\"counters\": {", nl3);
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      std::fprintf(out, "%s", i ? ", " : "");
      json_string(out, s.values[i].first);
      std::fprintf(out, ": %llu", s.values[i].second);
    }
    std::fprintf(out, "}}");
  }
  std::fprintf(out, one_line ? "]}\n" : "\n]}\n");
}

void print_json(const std::vector<endpoint_snapshot>& all) { write_json(stdout, all, false); }

void print_csv(const std::vector<endpoint_snapshot>& all) {
  // One row per endpoint; the columns are the union of the names, in first-seen order.
  std::vector<std::string> names;
  for (const endpoint_snapshot& s : all)
    for (const auto& [k, v] : s.values)
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
  std::printf("pid,port,owner,torn");
  for (const std::string& k : names) std::printf(",%s", k.c_str());
  std::printf("\n");
  for (const endpoint_snapshot& s : all) {
    std::printf("%d,%u,%s,%d", s.pid, s.port, state_name(s.owner), s.torn ? 1 : 0);
    for (const std::string& k : names) std::printf(",%llu", s.get(k.c_str()));
    std::printf("\n");
  }
}

volatile sig_atomic_t g_stop = 0;

int top(double interval, long count) {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = isatty(STDOUT_FILENO);
  for (long n = 0; !g_stop && (count <= 0 || n < count); ++n) {
    if (n && !g_stop) {
      timespec d{
          static_cast<time_t>(interval),
          static_cast<long>((interval - static_cast<double>(static_cast<time_t>(interval))) * 1e9)};
      nanosleep(&d, nullptr);
      if (g_stop) break;
    }
    const std::vector<endpoint_snapshot> all = read_all_live();
    if (tty) std::printf("\033[H\033[2J");
    const time_t now = time(nullptr);
    char when[32];
    std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&now));
    std::printf("exanet-stats %s: %zu endpoint(s) of uid %u on this host\n", when, all.size(),
                static_cast<unsigned>(geteuid()));
    print_table(all);
    if (!tty) std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

// record: snapshots of the live counters, one JSON document per line (JSON Lines), at every
// interval and at once on SIGUSR1 (`kill -USR1` the recorder, not the job), and a last one on
// SIGINT or SIGTERM. The job itself takes no signal and no thread: its counters are already in
// shared files, so a snapshot is a read from outside, as UCX's timer and signal triggers are
// from inside. Each line carries "time" (Unix seconds), "seq" and "trigger" (start, timer,
// usr1, end).
volatile sig_atomic_t g_snapshot = 0;

int record(const char* path, double interval, long count) {
  std::FILE* out = !std::strcmp(path, "-") ? stdout : std::fopen(path, "a");
  if (!out) {
    std::fprintf(stderr, "exanet-stats: cannot write %s: %s\n", path, std::strerror(errno));
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = [](int) { g_snapshot = 1; };
  sigaction(SIGUSR1, &sa, nullptr);  // no SA_RESTART: the signal cuts the wait short
  long seq = 0;
  auto snapshot = [&](const char* trigger) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const std::string head = "\"time\": " + std::to_string(now.tv_sec) + "." +
                             std::to_string(now.tv_nsec / 1000000 + 1000).substr(1) +
                             ", \"seq\": " + std::to_string(seq++) + ", \"trigger\": \"" +
                             trigger + "\", ";
    write_json(out, read_all_live(), true, head);
    std::fflush(out);
  };
  snapshot("start");
  long timed = 0;
  timespec next{};
  clock_gettime(CLOCK_MONOTONIC, &next);
  const long step_ns = static_cast<long>(interval * 1e9);
  while (!g_stop && (count <= 0 || timed < count)) {
    next.tv_nsec += step_ns % 1000000000L;
    next.tv_sec += step_ns / 1000000000L + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    // Sleep to the next tick; a SIGUSR1 wakes it for a snapshot, then it sleeps on.
    while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
      if (g_snapshot) {
        g_snapshot = 0;
        snapshot("usr1");
      }
    }
    if (g_stop) break;
    snapshot("timer");
    ++timed;
  }
  if (g_stop) snapshot("end");
  if (out != stdout) std::fclose(out);
  return 0;
}

// segments [--stale]: every exanet file of this user in /dev/shm and whether its owner lives.
// Segments and live files carry their owner's lock; named AVs carry none and are listed as
// left behind whenever they exist (a test that makes one removes it). A wake socket lives and
// goes with its segment (dev/emu/segment.hpp): it is left behind when its segment is gone or
// dead.
int segments(bool stale_only) {
  namespace emu = exanet::dev::emu;
  int left = 0;
  std::vector<std::pair<std::string, owner_state>> segment_states;
  const auto show = [&](const char* kind, const std::string& name, owner_state st, int pid) {
    if (stale_only && st == owner_state::alive) return;
    if (st != owner_state::alive) ++left;
    std::printf("%-8s %-7s %-8d %s/%s\n", kind, state_name(st), pid, shm_dir, name.c_str());
  };
  if (!stale_only) std::printf("%-8s %-7s %-8s %s\n", "KIND", "OWNER", "PID", "FILE");
  for (const std::string& name : shm_files("exanet.")) {
    const std::string path = std::string(shm_dir) + "/" + name;
    owner_state st = probe_owner(path);
    int pid = 0;
    std::uint32_t version = 0;
    if (const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
      emu::segment_header h{};
      if (pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
          h.magic == emu::segment_magic) {
        pid = h.owner_pid;
        version = h.version;
      }
      close(fd);
    }
    // A segment of an older layout (a build before its creator held the lock) can be judged
    // only by its creator's pid, as the provider judges it (dev/emu/device.cpp).
    constexpr std::uint32_t first_locked_layout = 8;  // dev/emu/layout.hpp's history
    static_assert(emu::layout_version >= first_locked_layout);
    if (version != 0 && version < first_locked_layout)
      st =
          pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) ? owner_state::alive : owner_state::gone;
    // A segment being created is unlocked for an instant: a dead verdict is confirmed later.
    else if (st == owner_state::gone) {
      usleep(100 * 1000);
      if (access(path.c_str(), F_OK) != 0) continue;  // removed meanwhile: nothing left behind
      st = probe_owner(path);
    }
    show("segment", name, st, pid);
    segment_states.emplace_back(name, st);
  }
  static constexpr char wake_prefix[] = "exanet-wake.";
  for (const std::string& name : shm_files(wake_prefix)) {
    const std::string segment = "exanet." + name.substr(sizeof wake_prefix - 1);
    owner_state st = owner_state::gone;
    for (const auto& [seg, seg_state] : segment_states)
      if (seg == segment) st = seg_state;
    // Made just now, its segment after the listing above: it is there now.
    if (st == owner_state::gone && access((std::string(shm_dir) + "/" + segment).c_str(), F_OK) == 0)
      st = probe_owner(std::string(shm_dir) + "/" + segment);
    show("wake", name, st, 0);
  }
  for (const std::string& name : shm_files(live::name_prefix)) {
    endpoint_snapshot s;
    const bool ok = read_live(name, s);
    // A live file of a killed process is kept for post-mortem reading: listed, not counted.
    if (stale_only) continue;
    std::printf("%-8s %-7s %-8d %s/%s\n", "counters",
                state_name(ok ? s.owner : probe_owner(std::string(shm_dir) + "/" + name)), s.pid,
                shm_dir, name.c_str());
  }
  for (const std::string& name : shm_files("exanet-av.")) show("av", name, owner_state::unknown, 0);
  return stale_only && left ? 1 : 0;
}

int clean() {
  int removed = 0;
  for (const std::string& name : shm_files(live::name_prefix)) {
    const std::string path = std::string(shm_dir) + "/" + name;
    if (probe_owner(path) != owner_state::gone) continue;
    if (unlink(path.c_str()) == 0) {
      std::printf("removed %s\n", path.c_str());
      ++removed;
    }
  }
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: exanet-stats FILE...        tabulate exanet-stats lines (\"-\": stdin)\n"
               "       exanet-stats -- COMMAND...  run COMMAND with FI_EXANET_STATS set, then "
               "tabulate\n"
               "       exanet-stats top [-i SECONDS] [-n COUNT]   live table (also --watch)\n"
               "       exanet-stats --json | --csv  live counters, once\n"
               "       exanet-stats record [-i SECONDS] [-n COUNT] FILE  JSON Lines snapshots at "
               "each interval and on SIGUSR1\n"
               "       exanet-stats segments [--stale]  exanet files in /dev/shm and their owners\n"
               "       exanet-stats clean          remove live files of processes that are gone\n");
}

// The options of the repeating commands: -i SECONDS (0.05 to max_interval), -n COUNT (0: until
// interrupted) and, for record, one FILE ("-": stdout). False (after saying why) on a bad one.
struct repeat_options {
  double interval;
  double max_interval;
  long count = 0;
  const char* path = nullptr;
};

bool parse_repeat(int argc, char** argv, repeat_options& o, bool wants_path) {
  for (int i = 2; i < argc; ++i) {
    char* end = nullptr;
    if (!std::strcmp(argv[i], "-i") && i + 1 < argc) {
      o.interval = std::strtod(argv[++i], &end);
      if (*end || !(o.interval >= 0.05 && o.interval <= o.max_interval)) {
        std::fprintf(stderr, "exanet-stats: -i wants seconds between 0.05 and %g\n", o.max_interval);
        return false;
      }
    } else if (!std::strcmp(argv[i], "-n") && i + 1 < argc) {
      o.count = std::strtol(argv[++i], &end, 10);
      if (*end || o.count < 0) {
        std::fprintf(stderr, "exanet-stats: -n wants a count (0: until interrupted)\n");
        return false;
      }
    } else if (wants_path && !o.path && argv[i][0] && (argv[i][0] != '-' || !argv[i][1])) {
      o.path = argv[i];
    } else {
      usage();
      return false;
    }
  }
  if (wants_path && !o.path) {
    usage();
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "top" || cmd == "--watch") {
    repeat_options o{1.0, 3600};
    if (!parse_repeat(argc, argv, o, false)) return 2;
    return top(o.interval, o.count);
  }
  if (cmd == "record") {
    repeat_options o{10.0, 86400};
    if (!parse_repeat(argc, argv, o, true)) return 2;
    return record(o.path, o.interval, o.count);
  }
  if (cmd == "--json" || cmd == "--csv") {
    if (argc > 2) {
      usage();
      return 2;
    }
    const std::vector<endpoint_snapshot> all = read_all_live();
    if (cmd == "--json")
      print_json(all);
    else
      print_csv(all);
    return 0;
  }
  if (cmd == "segments") {
    const bool stale = argc > 2 && !std::strcmp(argv[2], "--stale");
    if (argc > 3 || (argc == 3 && !stale)) {
      usage();
      return 2;
    }
    return segments(stale);
  }
  if (cmd == "clean") return clean();
  if (!std::strcmp(argv[1], "--")) {
    if (argc < 3) return 2;
    return run_and_report(argv + 2);
  }
  tally t;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-")) {
      absorb(std::cin, t);
      continue;
    }
    std::ifstream in(argv[i]);
    if (!in) {
      std::fprintf(stderr, "exanet-stats: cannot read %s\n", argv[i]);
      return 2;
    }
    absorb(in, t);
  }
  return report(t);
}
