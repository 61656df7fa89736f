#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A discrete-event model of thesis_coll's collectives under exanet's link model (issue 16).

run.sh part c runs bcast, reduce, allreduce and scatter (thesis_coll.c) on 16 ranks under
Open MPI 4.1 (pml cm, mtl ofi) with Open MPI's tuned algorithms forced, every message above
36 B a rendezvous, and the link model at 1 ms a hop. This program plays the same schedules over
the same network, message by message, and prints what each call should take if the network and
the protocols were all there is (no CPU time, no waiting for a core).

The network (prov/exanet/src/dev/link_model.hpp, fi_exanet(7) LINK MODEL):
  rank i sits on FPGA i % 4 of QFDB i / 4, QFDBs numbered along x, then y, then z of a 4x4x2
  torus (ranks 0-15: QFDBs (0..3, 0, 0)). Hops: 1 between two FPGAs of a QFDB; between QFDBs
  the torus distance (each dimension wraps) plus one at each end whose FPGA is not FPGA 0.
  A transfer's arrival, per sender-receiver pair and in order:
    start = max(now, the pair's previous transfer's end); end = start + bytes / bandwidth;
    arrival = end + hops x hop latency.
  A mailbox packet counts 64 bytes; a DMA write is, under the model, a staged write: its bytes
  then one 64-byte mailbox packet that carries the notification (dev/emu/device.cpp,
  dma_staged). Every packet to a process goes through its one mailbox, a FIFO in the order the
  senders claimed their slots, and the head is not taken before its arrival: a packet is seen
  at max(its arrival, when the packet claimed before it was seen) (poll_mailbox_modelled,
  "across senders the head blocks the rest"). --no-hol drops that rule.

The protocols (prov/exanet/docs/protocol.md §3.3, §3.3b, §3.3c), one rendezvous message from
S to R; H is one trip S->R, ts the send's post, tr the receive's post:
  write       receive first: RTR (R->S) at tr; the send finds it stored and writes (1 trip):
                data seen at ts + H when the RTR came before the send (a "fast receive").
              message first: RTS (S->R); the receive finds it unexpected and sends a CTS; the
                sender writes: 3 trips, data at tr + 2H.
              crossing (the receive posted before the RTS was seen, the RTR not at the sender
                when it sent): the RTS is dropped, the RTR serves as its CTS: data at tr + 2H.
              Together: data at max(ts + H, tr + 2H); the send completes when it writes,
                max(ts, tr + H).
  read        RTS, CTS (the emulated read request), write, and an ack: the receive completes
              at max(ts + H, tr) + 2H, the send one trip later (it completes on the ack).
  optimistic  a receive always sends its RTR at post; a send waits for it (no packet) and
              writes: data at max(ts + H, tr + 2H), as write, with no RTS or CTS.
  (Plus the mailbox order above, which moves every one of these.)

The schedules (Open MPI 4.1 coll_base, the tuned component's forced algorithms with no segment
size set, hence one segment; read from its sources, described here in our words):
  bcast 6, binomial: the tree where rank i's parent is i without its highest set bit and its
    children are i + 2^k for every 2^k above i's highest bit (0: 1, 2, 4, 8; 1: 3, 5, 9; ...).
    The root starts a non-blocking send to each child, lowest first, and waits for all; an
    inner rank receives from its parent, then does the same; a leaf receives.
  reduce 5, binomial: the in-order tree, where rank i's parent is i without its lowest set bit
    and its children are i + 2^k for every 2^k below i's lowest bit (0: 1, 2, 4, 8; 8: 9, 10,
    12; 12: 13, 14; ...). A rank with children posts the receive of its first child; then for
    each next child posts its receive and only then waits for the previous child (two receives
    at most outstanding), waits for the last, and sends to its parent with a blocking send; a
    leaf sends with a blocking send. MPI_SUM on floats: no time here.
  allreduce 3, recursive doubling (16 ranks: no extra ranks): for distance 1, 2, 4, 8 each rank
    posts a receive from rank ^ distance, sends to it with a blocking send, then waits for the
    receive.
  scatter 2, binomial: the in-order tree again. The root sends each child, lowest first, with
    blocking sends, the blocks of the child's subtree (1, 2, 4, 8 blocks to 1, 2, 4, 8); an
    even rank receives from its parent into a buffer of 16 blocks, then sends on the same way;
    an odd rank receives its one block.
thesis_coll: all ranks start together (the barrier), run ITERS / 10 + 1 untimed calls and ITERS
timed ones back to back, each rank's figure being its timed calls' mean; the line is the mean
over the ranks.

The cores (--cpus N, off by default; class Cpus): 16 ranks share 2 cores in run.sh, and how a
rank waits decides when it acts. In MPI_Wait (bcast's waitall, every receive) Open MPI's
progress loop yields the core when it finds nothing (mpi_yield_when_idle), so a rank that has
something to take gets a core almost at once. In a blocking send (reduce, allreduce, scatter)
pml cm calls the ofi MTL's blocking send, which polls the completion queue until the send
completes and never yields: such a rank holds its core for a whole scheduler slice (--slice-us,
default 4 ms, one tick at HZ=250: a spinning task is preempted only at a tick), the spinning
ranks take turns, and one of them sees the RTR or CTS it waits for only while it holds a core.
--pinned keeps rank r on core r mod N; --no-spin makes blocking sends wait as MPI_Wait does
(coll_sched_probe.c's isend variant). Crude: actions take no time, no other process competes
for the cores, and Linux's run queues are per core with a load balancer between them (neither
the free nor the pinned variant).

  coll_model.py [table|facts|edges] [--coll C ...] [--sizes N ...] [--families F ...]
                [--hop-ns NS] [--iters N] [--np N] [--intra-mbps M] [--inter-mbps M]
                [--no-hol] [--cpus N [--slice-us Q] [--pinned] [--no-spin]]
                [--samples coll.samples] [--shares share.samples]
table (the default): one line per collective, size and family, "coll size family model_us
measured_us measured/model fast_share msgs_per_call" (measured from thesis_coll's
coll.samples, "-" without), then with --shares the write family's fast-receive share (sends
that found their RTR stored: exanet's ri_sent over rendezvous sends), model beside run.sh's.
facts: the same runs as key=value lines, with the trees' depths and hops (the test's input).
edges: every tree edge and its hops.
Python 3 standard library only.
"""
import argparse
import heapq
import sys

EAGER_MAX = 36  # FI_EXANET_EAGER_MAX = FI_EXANET_MEDIUM_MAX in run.sh part c
PACKET = 64


# ---- the network --------------------------------------------------------------------------

class Net:
    def __init__(self, np_, hop_ns, torus=(4, 4, 2), intra_mbps=16000, inter_mbps=10000,
                 hol=True):
        self.np = np_
        self.hop_ns = hop_ns
        self.torus = torus
        self.intra = intra_mbps
        self.inter = inter_mbps
        self.hol = hol
        self.free = {}      # (src, dst): when the pair's last transfer finished injecting
        self.seen = {}      # dst: when the packet last claimed in its mailbox is seen

    def place(self, rank):
        slots = self.torus[0] * self.torus[1] * self.torus[2] * 4
        i = rank % slots
        q = i // 4
        return (q % self.torus[0], q // self.torus[0] % self.torus[1],
                q // (self.torus[0] * self.torus[1]), i % 4)

    def path(self, a, b):
        """(hops, crosses a torus link) between ranks a and b."""
        pa, pb = self.place(a), self.place(b)
        if pa[:3] == pb[:3]:
            return (0 if pa[3] == pb[3] else 1), False
        hops = 0
        for d in range(3):
            x = abs(pa[d] - pb[d])
            hops += min(x, self.torus[d] - x)
        return hops + (pa[3] != 0) + (pb[3] != 0), True

    def hops(self, a, b):
        return self.path(a, b)[0]

    def transfer(self, now, src, dst, data_bytes):
        """A packet (after data_bytes of a write, if any) from src to dst claimed at now: the
        time dst sees it."""
        hops, torus = self.path(src, dst)
        mbps = min(self.inter, self.intra) if torus else self.intra

        def ser(n):  # ns, as link_timing::serialize_ns; 0 MB/s here: no bandwidth term
            return (n * 1000 + mbps - 1) // mbps if mbps > 0 else 0
        start = max(now, self.free.get((src, dst), 0))
        end = start + ser(data_bytes) + ser(PACKET)
        self.free[(src, dst)] = end
        arrival = end + hops * self.hop_ns
        if self.hol:
            arrival = max(arrival, self.seen.get(dst, 0))
            self.seen[dst] = arrival
        return arrival


# ---- requests and the protocol engine ---------------------------------------------------

class Req:
    __slots__ = ("kind", "owner", "peer", "n", "size", "done", "waiter", "rtr_out", "t_post",
                 "blocking")

    def __init__(self, kind, owner, peer, n, size, t):
        self.kind, self.owner, self.peer, self.n, self.size = kind, owner, peer, n, size
        self.done = False
        self.waiter = None
        self.rtr_out = False
        self.t_post = t
        self.blocking = False  # a blocking send: its rank polls without yielding (--cpus)


class Sim:
    def __init__(self, net, family):
        assert family in ("write", "read", "optimistic")
        self.net = net
        self.family = family
        self.now = 0
        self.events = []
        self.seq = 0
        self.sent_n = {}       # (src, dst): sends posted so far (the nth send pairs with ...)
        self.recv_n = {}       # (src, dst): ... the nth receive posted at dst from src
        self.posted = {}       # (src, dst, n): receive posted at dst
        self.unexpected = {}   # (src, dst, n): an RTS seen by dst with no receive posted
        self.stored_rtr = {}   # (src, dst, n): an RTR seen by src before its send
        self.pending = {}      # (src, dst, n): a send waiting for a CTS or an RTR (or an ack)
        self.messages = 0
        self.rndv_sends = 0
        self.fast_sends = 0    # sends that found their RTR stored (exanet's ri_sent)
        self.concurrent = 0    # write: an RTR that crossed its send's RTS (exanet's concurrent)
        self.packets = {"rts": 0, "cts": 0, "rtr": 0, "write": 0, "ack": 0}
        self.ranks = {}        # rank number -> Rank
        self.unfinished = 0    # ranks whose program has not returned
        self.cpus = None       # a Cpus: ranks act only when they hold a core
        self.no_spin = False   # blocking sends wait as MPI_Wait does (coll_sched_probe isend)
        self.trace = None

    # -- event loop
    def at(self, t, fn, *args):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, fn, args))

    def run(self):
        # Until every rank is done.
        while self.events and self.unfinished:
            t, _, fn, args = heapq.heappop(self.events)
            self.now = t
            fn(*args)

    # -- the wire
    def packet(self, kind, src, dst, key, data_bytes=0):
        self.packets[kind] += 1
        t = self.net.transfer(self.now, src, dst, data_bytes)
        if self.trace is not None:
            self.trace.append((self.now, t, kind, src, dst, key[2]))
        self.at(t, self.arrive, kind, key)

    def write(self, s):
        key = (s.owner, s.peer, s.n)
        self.packet("write", s.owner, s.peer, key, s.size)

    def complete(self, r):
        r.done = True
        if r.waiter is not None:
            w, r.waiter = r.waiter, None
            w.wake()

    # -- posting (at the rank's current time)
    def post_send(self, rank, dst, size):
        n = self.sent_n.get((rank, dst), 0)
        self.sent_n[(rank, dst)] = n + 1
        s = Req("send", rank, dst, n, size, self.now)
        key = (rank, dst, n)
        self.messages += 1
        if size <= EAGER_MAX:
            raise ValueError("eager sizes are not modelled (every message here is > 36 B)")
        self.rndv_sends += 1
        if self.family in ("write", "optimistic") and key in self.stored_rtr:
            del self.stored_rtr[key]
            self.fast_sends += 1
            self.write(s)
            self.complete(s)
        elif self.family == "optimistic":
            self.pending[key] = s          # waits for the RTR, no packet
        else:
            self.pending[key] = s
            self.packet("rts", rank, dst, key)
        return s

    def post_recv(self, rank, src, capacity):
        n = self.recv_n.get((src, rank), 0)
        self.recv_n[(src, rank)] = n + 1
        r = Req("recv", rank, src, n, capacity, self.now)
        key = (src, rank, n)
        self.posted[key] = r
        if self.family == "optimistic":
            r.rtr_out = True
            self.packet("rtr", rank, src, key)
        elif key in self.unexpected:
            del self.unexpected[key]
            self.packet("cts", rank, src, key)
        elif self.family == "write" and capacity > EAGER_MAX:
            r.rtr_out = True
            self.packet("rtr", rank, src, key)
        return r

    # -- arrivals: the rank that takes the packet progresses at once (every rank waits inside
    # MPI), or, with --cpus, when it next holds a core
    HANDLER = {"rts": 1, "rtr": 0, "cts": 0, "write": 1, "ack": 0}  # index into (src, dst, n)

    def arrive(self, kind, key):
        if self.cpus is None:
            self.on_packet(kind, key)
            return
        p = self.ranks[key[self.HANDLER[kind]]]
        p.inbox.append((kind, key))
        self.cpus.need(p)

    def on_packet(self, kind, key):
        src, dst, n = key
        if kind == "rts":                               # at dst
            r = self.posted.get(key)
            if r is None:
                self.unexpected[key] = True
            elif not r.rtr_out:
                self.packet("cts", dst, src, key)
            # else: the RTR crossed it and serves as its CTS; the RTS is dropped
        elif kind == "rtr":                             # at src
            s = self.pending.pop(key, None)
            if s is None:
                self.stored_rtr[key] = True
            else:
                if self.family == "write":
                    self.concurrent += 1                # it serves the waiting RTS as a CTS
                self.write(s)
                self.complete(s)
        elif kind == "cts":                             # at src
            s = self.pending.pop(key)
            self.write(s)
            if self.family == "read":
                self.pending[key] = s                   # completes on the ack
            else:
                self.complete(s)
        elif kind == "write":                           # at dst
            r = self.posted.pop(key)
            if self.family == "read":
                self.packet("ack", dst, src, key)
            self.complete(r)
        elif kind == "ack":                             # at src
            self.complete(self.pending.pop(key))


class Rank:
    """One process running a generator that yields lists of requests to wait for."""

    def __init__(self, sim, rank, body):
        self.sim, self.rank = sim, rank
        self.gen = body(self)
        self.waiting = []
        self.marks = {}
        self.inbox = []        # packets seen, not yet taken (--cpus)
        self.cpu = None        # the core it holds a slice of (--cpus)
        sim.ranks[rank] = self
        sim.unfinished += 1

    def isend(self, dst, size):
        return self.sim.post_send(self.rank, dst, size)

    def send(self, dst, size):
        """A blocking send (MPI_Send): wait for it as for [isend], but spinning."""
        s = self.sim.post_send(self.rank, dst, size)
        s.blocking = not self.sim.no_spin
        return s

    def spinning(self):
        return any(r.blocking and not r.done for r in self.waiting)

    def run(self):
        """Holding a core (--cpus): takes what arrived and goes on as far as it can."""
        while self.inbox:
            kind, key = self.inbox.pop(0)
            self.sim.on_packet(kind, key)
        self.wake()

    def irecv(self, src, capacity):
        return self.sim.post_recv(self.rank, src, capacity)

    def mark(self, name):
        self.marks[name] = self.sim.now

    def start(self):
        if self.sim.cpus is None:
            self.sim.at(0, self.wake)
        else:
            self.sim.at(0, self.sim.cpus.need, self)

    def wake(self):
        while True:
            self.waiting = [r for r in self.waiting if not r.done]
            if self.waiting:
                self.waiting[0].waiter = self
                return
            if self.gen is None:
                return
            try:
                self.waiting = list(next(self.gen))
            except StopIteration:
                self.gen = None
                self.sim.unfinished -= 1
                return


class Cpus:
    """--cpus N --slice-us Q: the ranks share N cores. A rank waiting in MPI_Wait (Open MPI's
    progress loop, which yields the core when it finds nothing: mpi_yield_when_idle) takes what
    arrives as soon as a core is free or a slice ends: it used little CPU, so the scheduler runs
    it first. A rank in a blocking send (pml cm's MPI_Send calls the ofi MTL's blocking send,
    which polls the completion queue until the send completes, never yielding) holds a core for
    a whole slice of Q when it gets one, and the spinning ranks take turns: it sees the RTR or
    CTS it waits for only while it holds a core. Actions take no time. pinned: rank r runs on
    core r mod N only (per-core run queues that the load balancer never evens out); otherwise
    any core serves any rank."""

    def __init__(self, sim, n, slice_ns, pinned=False):
        self.sim, self.n, self.slice_ns, self.pinned = sim, n, slice_ns, pinned
        self.owner = [None] * n      # the spinning rank holding each core's slice
        self.token = [0] * n
        self.spin_ring = []          # spinning ranks waiting for a slice, in turn
        self.urgent = []             # yielding ranks with packets, waiting for a core

    def allowed(self, p, c):
        return not self.pinned or p.rank % self.n == c

    def free_core(self, p):
        for c in range(self.n):
            if self.owner[c] is None and self.allowed(p, c):
                return c
        return None

    def need(self, p):
        if p.cpu is not None:                        # spinning on a core: sees it now
            self.run_owner(p)
        elif p.spinning() or p in self.spin_ring:    # spinning, off a core: at its next slice
            return
        else:
            c = self.free_core(p)
            if c is None:
                if p not in self.urgent:
                    self.urgent.append(p)
            else:
                self.run_on(p, c)

    def run_on(self, p, c):
        """p runs on the free core c (a yielding rank, for no time)."""
        p.run()
        if p.spinning():
            self.take(p, c)

    def run_owner(self, p):
        p.run()
        if not p.spinning():
            c = p.cpu
            p.cpu = None
            self.owner[c] = None
            self.next_on(c)

    def take(self, p, c):
        self.owner[c] = p
        p.cpu = c
        self.token[c] += 1
        self.sim.at(self.sim.now + self.slice_ns, self.slice_end, c, self.token[c])

    def next_on(self, c):
        """Core c is free now: the yielding ranks with packets first, then the next spinner."""
        while True:
            p = next((q for q in self.urgent if self.allowed(q, c)), None)
            if p is None:
                break
            self.urgent.remove(p)
            p.run()
            if p.spinning():
                self.take(p, c)
                return
        while True:
            p = next((q for q in self.spin_ring if self.allowed(q, c)), None)
            if p is None:
                return
            self.spin_ring.remove(p)
            if not p.spinning():
                continue
            self.take(p, c)
            self.run_owner(p)
            return

    def slice_end(self, c, token):
        if token != self.token[c] or self.owner[c] is None:
            return
        p = self.owner[c]
        self.owner[c] = None
        p.cpu = None
        if p.spinning():
            self.spin_ring.append(p)
        self.balance()

    def balance(self):
        """Every free core to whoever waits for one (a spinner may wait while another core is
        free: the core it lost its slice on was taken, or, pinned, it may not move)."""
        for c in range(self.n):
            if self.owner[c] is None:
                self.next_on(c)


# ---- Open MPI 4.1's schedules --------------------------------------------------------------

def bmtree(rank, size):
    """Open MPI's binomial tree rooted at 0 (bcast): (parent, children in sending order)."""
    parent = None
    if rank:
        parent = rank ^ (1 << (rank.bit_length() - 1))
    mask = 1 if rank == 0 else 1 << rank.bit_length()
    kids = []
    while mask < size and (rank ^ mask) < size:
        kids.append(rank ^ mask)
        mask <<= 1
    return parent, kids


def in_order_bmtree(rank, size):
    """Open MPI's in-order binomial tree rooted at 0 (reduce, scatter)."""
    parent, kids, mask = None, [], 1
    while mask < size:
        remote = rank ^ mask
        if remote < rank:
            parent = remote
            break
        if remote < size:
            kids.append(remote)
        mask <<= 1
    return parent, kids


def bcast(p, size, np_):
    parent, kids = bmtree(p.rank, np_)
    if parent is not None:
        yield [p.irecv(parent, size)]
    if kids:
        yield [p.isend(k, size) for k in kids]


def reduce_(p, size, np_):
    parent, kids = in_order_bmtree(p.rank, np_)
    if kids:
        prev = p.irecv(kids[0], size)
        for k in kids[1:]:
            cur = p.irecv(k, size)
            yield [prev]
            prev = cur
        yield [prev]
    if parent is not None:
        yield [p.send(parent, size)]


def allreduce(p, size, np_):
    if np_ & (np_ - 1):
        raise ValueError("recursive doubling modelled for a power of two only")
    d = 1
    while d < np_:
        peer = p.rank ^ d
        r = p.irecv(peer, size)
        yield [p.send(peer, size)]
        yield [r]
        d <<= 1


def scatter(p, size, np_):
    parent, kids = in_order_bmtree(p.rank, np_)
    if parent is not None:
        yield [p.irecv(parent, size * np_ if p.rank % 2 == 0 else size)]
    for k in kids:
        blocks = min(k - p.rank, np_ - k)
        yield [p.send(k, size * blocks)]


SCHEDULES = {"bcast": bcast, "reduce": reduce_, "allreduce": allreduce, "scatter": scatter}


def messages_per_call(coll, np_):
    """What the algorithm sends per call, counted from its definition (the test's check)."""
    if coll == "allreduce":
        return np_ * (np_.bit_length() - 1)
    return np_ - 1  # a tree: one message per edge


def run(coll, size, family, np_=16, hop_ns=1_000_000, iters=15, hol=True, trace=False,
        intra_mbps=16000, inter_mbps=10000, cpus=0, slice_ns=0, pinned=False, no_spin=False):
    net = Net(np_, hop_ns, intra_mbps=intra_mbps, inter_mbps=inter_mbps, hol=hol)
    sim = Sim(net, family)
    sim.no_spin = no_spin
    if cpus:
        sim.cpus = Cpus(sim, cpus, slice_ns, pinned)
    if trace:
        sim.trace = []
    warm = iters // 10 + 1
    body = SCHEDULES[coll]

    def program(p):
        for i in range(warm + iters):
            if i == warm:
                p.mark("t0")
            yield from body(p, size, np_)
        p.mark("t1")

    ranks = [Rank(sim, r, program) for r in range(np_)]
    for p in ranks:
        p.start()
    if sim.cpus is not None:
        sim.at(0, sim.cpus.balance)  # after every rank's first steps
    sim.run()
    per_rank = []
    for p in ranks:
        if "t1" not in p.marks:
            raise RuntimeError(f"{coll} {family}: rank {p.rank} never finished (deadlock)")
        per_rank.append((p.marks["t1"] - p.marks["t0"]) / iters / 1000.0)
    return {
        "avg_us": sum(per_rank) / len(per_rank),
        "min_us": min(per_rank),
        "max_us": max(per_rank),
        "messages": sim.messages,
        "calls": warm + iters,
        "fast_share": sim.fast_sends / sim.rndv_sends if sim.rndv_sends else 0.0,
        "fast_sends": sim.fast_sends,
        "concurrent": sim.concurrent,
        "packets": dict(sim.packets),
        "trace": sim.trace,
    }


def tree_depth(tree, np_):
    def depth(r):
        kids = tree(r, np_)[1]
        return 1 + max(depth(k) for k in kids) if kids else 0
    return depth(0)


def deepest_hops(tree, net, np_):
    """The most hops on a path from the root to a leaf."""
    def worst(r):
        return max((net.hops(r, k) + worst(k) for k in tree(r, np_)[1]), default=0)
    return worst(0)


def read_samples(path):
    got = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) == 6:
                got[(w[0], int(w[1]), w[2])] = float(w[3])
    return got


def read_shares(path):
    """run.sh's share.samples, "program family rndv_sends ri_sends": {(coll, family): share}."""
    got = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and w[0].startswith("osu_") and int(w[2]) > 0:
                got[(w[0][4:], w[1])] = int(w[3]) / int(w[2])
    return got


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", default="table", choices=("table", "facts", "edges"))
    ap.add_argument("--coll", nargs="+", default=list(SCHEDULES))
    ap.add_argument("--sizes", nargs="+", type=int, default=[64, 256, 1024, 8192])
    ap.add_argument("--families", nargs="+", default=["write", "read", "optimistic"])
    ap.add_argument("--hop-ns", type=int, default=1_000_000)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--np", type=int, default=16)
    ap.add_argument("--samples", help="thesis_coll's coll.samples, for the measured column")
    ap.add_argument("--shares", help="run.sh's share.samples: the measured fast-receive share "
                                     "of each collective and family, beside the model's")
    ap.add_argument("--no-hol", action="store_true",
                    help="no head-of-line blocking across senders in a mailbox")
    ap.add_argument("--intra-mbps", type=int, default=16000,
                    help="intra-QFDB bandwidth, MB/s (0: none, transfers take no time)")
    ap.add_argument("--inter-mbps", type=int, default=10000,
                    help="torus bandwidth, MB/s (0: none)")
    ap.add_argument("--cpus", type=int, default=0,
                    help="cores the ranks share (0: each rank has its own; see Cpus)")
    ap.add_argument("--slice-us", type=float, default=4000.0,
                    help="with --cpus: the slice a spinning rank holds a core for (default: "
                         "one tick at HZ=250, the kernel of BENCHMARKS.md's machine)")
    ap.add_argument("--no-spin", action="store_true",
                    help="with --cpus: blocking sends yield as MPI_Wait does (coll_sched_probe's "
                         "isend variant)")
    ap.add_argument("--pinned", action="store_true",
                    help="with --cpus: rank r runs on core r mod N only")
    a = ap.parse_args(argv)
    measured = read_samples(a.samples) if a.samples else {}
    net = Net(a.np, a.hop_ns, intra_mbps=a.intra_mbps, inter_mbps=a.inter_mbps)
    if a.mode == "edges":
        for coll, tree in (("bcast", bmtree), ("reduce/scatter", in_order_bmtree)):
            for r in range(a.np):
                for k in tree(r, a.np)[1]:
                    print(f"{coll} {r}->{k} hops={net.hops(r, k)}")
        return 0
    if a.mode == "facts":
        print(f"depth_bcast={tree_depth(bmtree, a.np)}")
        print(f"depth_in_order={tree_depth(in_order_bmtree, a.np)}")
        print(f"deepest_hops_bcast={deepest_hops(bmtree, net, a.np)}")
        print(f"deepest_hops_in_order={deepest_hops(in_order_bmtree, net, a.np)}")
    else:
        print("# coll size family model_us measured_us measured/model fast_share msgs_per_call")
    shares = read_shares(a.shares) if a.shares else {}
    model_share = {}
    for coll in a.coll:
        for size in a.sizes:
            for fam in a.families:
                r = run(coll, size, fam, a.np, a.hop_ns, a.iters, hol=not a.no_hol,
                        cpus=a.cpus, slice_ns=int(a.slice_us * 1000), pinned=a.pinned,
                        no_spin=a.no_spin,
                        intra_mbps=a.intra_mbps, inter_mbps=a.inter_mbps)
                per_call = r["messages"] / r["calls"]
                if a.mode == "facts":
                    print(f"{coll}.{size}.{fam}.avg_us={r['avg_us']:.3f}")
                    print(f"{coll}.{size}.{fam}.msgs_per_call={per_call:g}")
                    print(f"{coll}.{size}.{fam}.expected_msgs={messages_per_call(coll, a.np)}")
                    print(f"{coll}.{size}.{fam}.fast_share={r['fast_share']:.4f}")
                    print(f"{coll}.{size}.{fam}.messages={r['messages']}")
                    print(f"{coll}.{size}.{fam}.rtr={r['packets']['rtr']}")
                    print(f"{coll}.{size}.{fam}.fast_sends={r['fast_sends']}")
                    print(f"{coll}.{size}.{fam}.concurrent={r['concurrent']}")
                    continue
                model_share.setdefault((coll, fam), []).append(r["fast_share"])
                m = measured.get((coll, size, fam))
                ms = f"{m:.1f}" if m is not None else "-"
                ratio = f"{m / r['avg_us']:.2f}" if m is not None and r["avg_us"] > 0 else "-"
                print(f"{coll} {size} {fam} {r['avg_us']:.1f} {ms} {ratio} "
                      f"{r['fast_share']:.2f} {per_call:g}")
    if shares and a.mode == "table":
        print("# fast-receive share over the sizes (write sends that found their RTR stored): "
              "coll family model measured")
        for (coll, fam), v in model_share.items():
            # Only the write family's counter (ri_sent) means "found its RTR": the optimistic
            # family counts every RTR-driven send in it (rndv_optimistic.cpp).
            if (coll, fam) in shares and fam == "write":
                print(f"share {coll} {fam} {sum(v) / len(v):.2f} {shares[(coll, fam)]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
