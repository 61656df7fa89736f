/* The optimistic variant (proto/rndv_optimistic.cpp): matching at the sender.
 *
 * One receiver posts NR long receives, each an RTR (tag, any-tag bit) that goes through its
 * FIFO mailbox to the sender; it may also cancel receives it posted (rtr_cancel, answered by the
 * sender: withdrawn if still stored). One sender posts NS long sends with tags. No send takes a
 * psn and nothing else is ordered: the sender pairs an arriving RTR with the first waiting send it
 * matches, and a new send with the first stored RTR matching its tag; the write is the pairing.
 * Tags and any-tag bits are chosen by the model in every combination.
 *
 * Checked, over every interleaving:
 *   - a receive is written at most once, never after its RTR was withdrawn, and a send writes
 *     at most once;
 *   - the matching rule: of two receives, the one posted first never holds the later of two
 *     sends that both match it;
 *   - nothing is stranded: at the end no uncancelled receive and unwritten send match each other;
 *   - a cancel answered "not withdrawn" belongs to a receive that was written.
 * spin -a optimistic.pml && gcc -O2 -o pan pan.c && ./pan     (check.sh runs it; -DNEWEST
 * makes the sender serve the newest stored RTR instead, which must fail the matching rule)
 */
#ifndef NS
#define NS 3
#endif
#ifndef NR
#define NR 3
#endif
#ifndef CANCELS
#define CANCELS 1
#endif
#define NONE 255
#ifdef NEWEST  /* a wrong sender: it serves the newest stored RTR (the check must fail) */
#define EARLIER(a, b) ((a) > (b))
#else
#define EARLIER(a, b) ((a) < (b))
#endif

byte sTag[NS];            /* tag of each send */
byte rTag[NR];            /* tag of each receive */
bool rAny[NR];            /* the receive ignores every tag bit */
byte got[NR];             /* send written into each receive, or NONE */
byte by[NS];              /* receive each send wrote, or NONE */
bool withdrawn[NR];       /* the sender withdrew this receive's RTR */
bool cancelled[NR];       /* the receive asked to cancel */
bool stored[NR];          /* the sender holds this receive's RTR, unserved */
byte storedSeq[NR];       /* arrival order of stored RTRs */
byte arrivals = 0;
bool receiverDone = false, senderDone = false;

mtype = { RTR, CANCEL, WITHDRAWN, KEPT };
chan toSender = [NR + CANCELS] of { mtype, byte };   /* the sender's mailbox: FIFO */
chan toReceiver = [CANCELS] of { mtype, byte };

#define matches(r, s) (rAny[r] || rTag[r] == sTag[s])

inline write(r, s) {
  assert(got[r] == NONE && by[s] == NONE && !withdrawn[r]);
  got[r] = s;
  by[s] = r;
}

proctype Sender() {
  byte ns = 0, i, j, best, r;
  mtype m;
  do
  :: atomic { ns < NS ->
       /* a new send: the first stored RTR (in arrival order) that matches its tag */
       best = NONE; i = 0;
       do
       :: i < NR ->
            if
            :: stored[i] && matches(i, ns) && (best == NONE || EARLIER(storedSeq[i], storedSeq[best])) -> best = i
            :: else -> skip
            fi;
            i++
       :: else -> break
       od;
       if
       :: best != NONE -> stored[best] = false; write(best, ns)
       :: else -> skip   /* waits, sending nothing */
       fi;
       ns++ }
  :: atomic { toSender?m, r ->
       if
       :: m == RTR ->
            /* the first waiting send (posted, not written) it matches */
            j = 0; best = NONE;
            do
            :: j < ns && best == NONE ->
                 if
                 :: by[j] == NONE && matches(r, j) -> best = j
                 :: else -> skip
                 fi;
                 j++
            :: else -> break
            od;
            if
            :: best != NONE -> write(r, best)
            :: else -> stored[r] = true; storedSeq[r] = arrivals; arrivals++
            fi
       :: m == CANCEL ->
            if
            :: stored[r] -> stored[r] = false; withdrawn[r] = true; toReceiver!WITHDRAWN, r
            :: else -> toReceiver!KEPT, r
            fi
       fi }
  :: atomic { ns == NS && receiverDone && empty(toSender) -> break }
  od;
  senderDone = true
}

proctype Receiver() {
  byte nr = 0, c = 0, r;
  mtype m;
  do
  :: nr < NR -> toSender!RTR, nr; nr++
  :: c < CANCELS && nr > 0 ->
       /* cancel one posted receive that has not completed yet */
       select (r : 0 .. NR - 1);
       if
       :: r < nr && !cancelled[r] && got[r] == NONE ->
            cancelled[r] = true; c++;
            toSender!CANCEL, r;
            toReceiver?m, r;
            assert(m == WITHDRAWN || got[r] != NONE)  /* kept: its write came first */
       :: else -> skip
       fi
  :: nr == NR -> break
  od;
  receiverDone = true
}

init {
  byte i = 0, j, k;
  do
  :: i < NS -> if :: sTag[i] = 0 :: sTag[i] = 1 fi; by[i] = NONE; i++
  :: else -> break
  od;
  i = 0;
  do
  :: i < NR ->
       if :: rTag[i] = 0 :: rTag[i] = 1 fi;
       if :: rAny[i] = false :: rAny[i] = true fi;
       got[i] = NONE; i++
  :: else -> break
  od;
  run Sender(); run Receiver();
  senderDone;
  /* the matching rule */
  i = 0;
  do
  :: i < NR ->
       j = i + 1;
       do
       :: j < NR ->
            assert(!(got[i] != NONE && got[j] != NONE && got[j] < got[i] && matches(i, got[j])));
            j++
       :: else -> break
       od;
       i++
  :: else -> break
  od;
  /* nothing stranded */
  i = 0;
  do
  :: i < NR ->
       k = 0;
       do
       :: k < NS ->
            assert(!(got[i] == NONE && !withdrawn[i] && by[k] == NONE && matches(i, k)));
            k++
       :: else -> break
       od;
       i++
  :: else -> break
  od
}
