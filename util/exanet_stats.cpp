// exanet-stats: tabulates the counters exanet endpoints print at close (FI_EXANET_STATS).
//
//   exanet-stats FILE...          the "exanet-stats key=value ..." lines in FILEs ("-": stdin)
//   exanet-stats -- COMMAND...    runs COMMAND with FI_EXANET_STATS pointing at a temporary file
//                                 (exported to every process it starts, mpirun ranks included),
//                                 then tabulates what its endpoints printed
//
// Prints every counter summed over the endpoints, the largest single value for high-water marks,
// and the shares a user asks about first: how many received messages found their receive
// already posted, and which protocol carried the messages.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr,
                 "usage: exanet-stats FILE...        tabulate exanet-stats lines (\"-\": stdin)\n"
                 "       exanet-stats -- COMMAND...  run COMMAND with FI_EXANET_STATS set, then "
                 "tabulate\n");
    return argc < 2 ? 2 : 0;
  }
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
