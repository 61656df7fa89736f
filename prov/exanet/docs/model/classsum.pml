/*
 * classsum.pml -- "class-sum tickets" for exanet's receiver-initiated rendezvous (RTR).
 * One sender S, one receiver R, one mailbox FIFO each way, DMA write + notification
 * unordered with respect to the mailbox.  classsum.md explains the model, how to run it,
 * the results, and the corrections below.
 *
 *   Correction 1 (FIX1): R matches mailbox packets in psn order; a packet that arrives
 *                        while a lower psn is unseen is parked until the gap closes.
 *   Correction 2 (FIX2): R takes DMA notifications in psn order too, so consumed[] always
 *                        counts a psn prefix and a class sum is an exact class index.
 *                        FIX2=2 checks the alternative: no RTR while a psn gap is open.
 *
 * Properties: (1) matching == reference matching; (2) exactly once; (3) completion;
 * (4) no leftovers.  Each assert below is tagged with the property it checks.
 */

#ifndef NS
#define NS 3            /* sends */
#endif
#ifndef NR
#define NR 3            /* receives */
#endif
#ifndef NTAGS
#define NTAGS 2         /* full tags 0..NTAGS-1; bit 0 is the protocol bit */
#endif
#ifndef FIX1
#define FIX1 1          /* correction 1: mailbox packets are matched in psn order */
#endif
#ifndef FIX2
#define FIX2 1          /* correction 2: DMA notifications are taken in psn order too
                           (2: the alternative, no RTR while a psn gap is open) */
#endif
#ifndef LAZY
#define LAZY 0          /* 1: late RTRs go out at a later step of R's choosing, not at once */
#endif
#ifndef LOGLEN
#define LOGLEN 0        /* sender's per-peer log: 0 = every send, else the last LOGLEN sends */
#endif

#ifndef REL
#define REL 0           /* 1: relative tickets, as exanet implements them: an RTR carries the
                           receiver's psn watermark w and j, "the j-th class send after psn w";
                           j and the suspension test count only unmatched pending receives */
#endif

#ifndef PROBE
#define PROBE 0         /* coverage probe: -DPROBE=n turns reaching HIT(n) into an error */
#endif
#define HIT(n)  assert(PROBE != (n))

/* receive kinds */
#define WILD   0
#define EXACT  1
#define CLASSQ 2

/* receive states */
#define R_NOTPOSTED 0
#define R_POSTED    1   /* posted, unmatched */
#define R_WAIT      2   /* an RTS matched this RTR'd receive: wait for notification or NACK */
#define R_SI        3   /* matched, CTS sent, waiting for the DMA notification */
#define R_DONE      4

/* RTR state of a receive */
#define RTR_NO   0      /* sends no RTR: wildcard, eager capacity, or matched at post */
#define RTR_SUSP 1      /* long capacity but suspended: late RTR when the suspension lifts */
#define RTR_SENT 2
#define RTR_NACK 3

/* send states */
#define S_NOTISSUED 0
#define S_RTS       1   /* long: RTS sent, waiting for a CTS or an RTR */
#define S_DONE      2   /* eager sent, or long DMA issued */

mtype = { RTS, ENVD, NACK, RTR, CTS };

chan s2r = [NS+NR] of { mtype, byte, byte };              /* RTS(psn,tag) ENVD(psn,tag) NACK(recv,0) */
chan r2s = [2*NR]  of { mtype, byte, byte, byte, byte, byte };  /* RTR(recv,tag,Q,k,w) CTS(recv,psn,0,0,0) */

/* ---- sender ---- (psns are 1-based: send number j has psn j; 0 means none) */
byte sTag[NS+1]; bit sLong[NS+1]; byte sSt[NS+1];
byte issued;                          /* sends issued so far */
byte sent[4];                         /* per full tag */
byte logStart;                        /* bounded log: psn of the first logged send, 0 = no log yet */
byte stK[NR], stTag[NR], stQ[NR];     /* stored RTRs, by receive; stK == 0: none */

/* ---- DMA in flight: the data is written, the notification not yet seen by R ---- */
byte nfPsn[NR];

/* ---- receiver ---- */
byte rTag[NR], rQ[NR]; bit rLong[NR];    /* receive descriptors; rQ == 3: wildcard */
byte rSt[NR], rRtr[NR], rWait[NR];
byte posted;                          /* receives posted so far (posting order = index) */
byte consumed[4];                     /* per full tag */
bit  seen[NS+1];                      /* psn observed, by mailbox packet or by notification */
byte wm;                              /* every psn <= wm observed */
byte ux[NS]; byte nux;                /* unexpected queue, arrival order */
bit  canLift;                         /* LAZY only: some suspended receive may send its late RTR */
bit  park[NS+1];                      /* packets that arrived beyond a psn gap (correction 1) */

/* ---- ghosts: where data landed, and the reference matching ---- */
byte rMatch[NR], writes[NR], deliv[NS+1];
byte oMatch[NR]; bit oPend[NR]; bit oUx[NS+1];

/* scratch, used only inside d_step sequences (not part of the state) */
hidden byte i, j, t, k, n, p, r, q, x, tg, qq, w;
hidden byte ok;

#define INCLASS(tt, b, m)  ((((tt) ^ (b)) & ~(m) & 3) == 0)
#define MATCHES(tt, rr)    INCLASS(tt, rTag[rr], rQ[rr])
#define OVERLAP(a, b)      (((rTag[a] ^ rTag[b]) & ~(rQ[a] | rQ[b]) & 3) == 0)
#define SAMECLASS(a, b)    (rQ[a] == rQ[b] && INCLASS(rTag[a], rTag[b], rQ[b]))
#define PENDING(a)         (rSt[a] != R_NOTPOSTED && rSt[a] != R_DONE)
#if REL
#define OPEN(a)            (rSt[a] == R_POSTED)      /* can still take a message */
#else
#define OPEN(a)            PENDING(a)
#endif
#define NFREADY(rr)        (nfPsn[rr] != 0 && (FIX2 != 1 || nfPsn[rr] <= wm + 1))
#define INLOG(pp)          (LOGLEN == 0 || (logStart != 0 && (pp) >= logStart && (pp) + LOGLEN > issued))

/* ================= sender ================= */

inline classSent(b, m)          /* n = sum over the class of sent[] */
{
  n = 0; t = 0;
  do
  :: t < 4 -> if :: INCLASS(t, b, m) -> n = n + sent[t] :: else fi; t++
  :: else -> break
  od
}

inline dma(pp, rr)              /* DMA write of send pp into receive rr, notification follows */
{
  writes[rr]++; assert(writes[rr] == 1);      /* (2) no receive is written twice   */
  deliv[pp]++;  assert(deliv[pp] == 1);       /* (2) a send's data lands only once */
  nfPsn[rr] = pp;
  sSt[pp] = S_DONE
}

inline issue(tt, lng)          /* S issues its next send with full tag tt, eager or long */
{
  issued++; p = issued; sTag[p] = tt; sLong[p] = lng;
  sent[tt]++;
  /* stored RTRs whose count this send brings to N == k */
  x = NR; r = 0;
  do
  :: r < NR ->
     if
     :: stK[r] != 0 && INCLASS(tt, stTag[r], stQ[r]) ->
        classSent(stTag[r], stQ[r]);
        if
        :: n == stK[r] && lng && x == NR -> x = r; stK[r] = 0     /* target: RI DMA  */
        :: n == stK[r] && !lng -> stK[r] = 0; HIT(2)              /* eager: drop RTR */
        :: else -> skip
        fi
     :: else -> skip
     fi; r++
  :: else -> break
  od;
  if
  :: lng && x < NR -> dma(p, x); HIT(1);
     printf("S: send psn %d tag %d long: stored RTR of r%d reaches N==k -> RI DMA into r%d\n", p, tt, x, x)
  :: lng && x == NR -> s2r!RTS(p, tt); sSt[p] = S_RTS;
     printf("S: send psn %d tag %d long -> RTS\n", p, tt)
  :: !lng -> s2r!ENVD(p, tt); sSt[p] = S_DONE;
     printf("S: send psn %d tag %d eager -> Env+D\n", p, tt)
  fi
}

#define ISSUE(tt, lng)  :: issued < NS -> d_step { issue(tt, lng) }

active proctype Sender()
{
end_s:
  do
  ISSUE(0, 0) ISSUE(0, 1) ISSUE(1, 0) ISSUE(1, 1)
#if NTAGS > 2
  ISSUE(2, 0) ISSUE(2, 1)
#endif
  :: d_step {
       r2s?RTR(r, tg, qq, k, w) ->
       if :: LOGLEN > 0 && logStart == 0 -> logStart = issued + 1 :: else fi;
#if REL
       /* k is relative: the k-th class send after psn w.  Make it absolute (what the
          implementation's countdown of stored RTRs amounts to). */
       n = 0; p = 1;
       do
       :: p <= w -> if :: INCLASS(sTag[p], tg, qq) -> n++ :: else fi; p++
       :: else -> break
       od;
       k = k + n;
#endif
       classSent(tg, qq);
       if
#if REL
       :: issued > w && !INLOG(w + 1) -> s2r!NACK(r, 0); HIT(6);     /* the log misses a send after w */
          printf("S: RTR(r%d, after psn %d): log does not reach back -> NACK\n", r, w)
       :: !(issued > w && !INLOG(w + 1)) && n < k -> stK[r] = k; stTag[r] = tg; stQ[r] = qq; HIT(3)
#else
       :: n < k -> stK[r] = k; stTag[r] = tg; stQ[r] = qq; HIT(3);      /* store */
#endif
       :: n < k -> stK[r] = k; stTag[r] = tg; stQ[r] = qq; HIT(3);      /* store */
          printf("S: RTR(r%d, k=%d): N=%d < k -> stored\n", r, k, n)
#if REL
       :: !(issued > w && !INLOG(w + 1)) && n >= k ->
#else
       :: else ->
#endif
          printf("S: RTR(r%d, k=%d): N=%d >= k, ", r, k, n);
          p = 0; n = 0;                                                  /* p = k-th class send */
          do
          :: n < k -> p++; if :: INCLASS(sTag[p], tg, qq) -> n++ :: else fi
          :: else -> break
          od;
          printf("target psn %d: ", p);
          if
          :: !INLOG(p) -> s2r!NACK(r, 0); printf("not in log -> NACK\n"); HIT(6)          /* not in the log  */
          :: INLOG(p) && !sLong[p] -> printf("eager -> drop\n"); HIT(4)                   /* eager: drop     */
          :: INLOG(p) && sLong[p] && sSt[p] == S_RTS -> dma(p, r);                 /* RTR is its CTS  */
             printf("pending long -> RTR as CTS, DMA into r%d\n", r); HIT(5)
          :: INLOG(p) && sLong[p] && sSt[p] != S_RTS -> s2r!NACK(r, 0);           /* already matched */
             printf("long, already matched -> NACK\n"); HIT(7)
          fi
       fi
     }
  :: d_step {
       r2s?CTS(r, p, x, tg, w) ->
       printf("S: CTS(r%d, psn %d) -> DMA\n", r, p); HIT(8);
       assert(sLong[p] && sSt[p] == S_RTS);                              /* (2) one match per send */
       dma(p, r)
     }
  od
}

/* ================= receiver ================= */

inline oracleArrive(m)          /* reference: message m arrives (psn order) */
{
  qq = 0;
  do
  :: qq < NR && !(oPend[qq] && MATCHES(sTag[m], qq)) -> qq++
  :: else -> break
  od;
  if
  :: qq < NR -> oMatch[qq] = m; oPend[qq] = 0
  :: else -> oUx[m] = 1
  fi
}

inline oraclePost(rr)           /* reference: receive rr is posted */
{
  qq = 1;
  do
  :: qq <= NS && !(oUx[qq] && MATCHES(sTag[qq], rr)) -> qq++
  :: else -> break
  od;
  if
  :: qq <= NS -> oMatch[rr] = qq; oUx[qq] = 0
  :: else -> oPend[rr] = 1
  fi
}

inline observe(pp)              /* first sighting of psn pp at R */
{
  seen[pp] = 1;
  do
  :: wm < NS && seen[wm + 1] -> wm++; oracleArrive(wm)
  :: else -> break
  od
}

inline complete(rr, pp)
{
  rSt[rr] = R_DONE; rMatch[rr] = pp; consumed[sTag[pp]]++; rWait[rr] = 0
}

inline deliverEager(rr, pp)     /* Env+D: copy the payload out of the packet */
{
  writes[rr]++; assert(writes[rr] == 1);
  deliv[pp]++;  assert(deliv[pp] == 1);
  complete(rr, pp)
}

inline eligible(rr)             /* ok = may send an RTR now */
{
  ok = 1; j = 0;
  do
  :: j < rr -> if :: OPEN(j) && OVERLAP(j, rr) && !SAMECLASS(j, rr) -> ok = 0 :: else fi; j++
  :: else -> break
  od;
  j = 0;
  do
  :: j < nux -> if :: MATCHES(sTag[ux[j]], rr) -> ok = 0 :: else fi; j++
  :: else -> break
  od;
#if FIX2 == 2
  j = wm + 1;                                          /* alternative: no RTR across a psn gap */
  do
  :: j <= NS -> if :: seen[j] -> ok = 0 :: else fi; j++
  :: else -> break
  od;
#endif
  skip
}

inline sendRTR(rr)
{
  k = 1; t = 0;
#if !REL
  do
  :: t < 4 -> if :: INCLASS(t, rTag[rr], rQ[rr]) -> k = k + consumed[t] :: else fi; t++
  :: else -> break
  od;
#endif
  j = 0;
  do
  :: j < rr -> if :: OPEN(j) && SAMECLASS(j, rr) -> k++ :: else fi; j++
  :: else -> break
  od;
  r2s!RTR(rr, rTag[rr], rQ[rr], k, (REL -> wm : 0));
  rRtr[rr] = RTR_SENT;
  printf("R: r%d sends RTR(tag %d, Q %d, k=%d)\n", rr, rTag[rr], rQ[rr], k)
}

inline lift()                   /* late RTRs, in posting order */
{
  i = 0;
  do
  :: i < posted ->
     if
     :: rSt[i] == R_POSTED && rRtr[i] == RTR_SUSP -> eligible(i);
        if :: ok -> printf("R: suspension of r%d lifts (late RTR)\n", i); sendRTR(i); HIT(15) :: else fi
     :: else
     fi; i++
  :: else -> break
  od;
  skip
}

inline arrive(pp, tt, lng)      /* an RTS or Env+D from the mailbox */
{
  if
  :: seen[pp] -> printf("R: mailbox psn %d already served -> dropped\n", pp); HIT(9)
  :: !seen[pp] && FIX1 && pp > wm + 1 -> park[pp] = 1; HIT(10);
     printf("R: mailbox psn %d arrives while psn %d is unseen -> parked\n", pp, wm + 1)
  :: else ->
     if :: lng -> printf("R: mailbox RTS psn %d tag %d: ", pp, tt)
        :: else -> printf("R: mailbox Env+D psn %d tag %d: ", pp, tt)
     fi;
     observe(pp);
     r = 0;
     do
     :: r < NR && !(rSt[r] == R_POSTED && MATCHES(tt, r)) -> r++
     :: else -> break
     od;
     if
     :: r < NR && !lng -> deliverEager(r, pp); printf("r%d completes\n", r)
     :: r < NR && lng && rRtr[r] == RTR_SENT -> rSt[r] = R_WAIT; rWait[r] = pp;
        printf("matches RTR'd r%d -> waits\n", r); HIT(11)
     :: r < NR && lng && rRtr[r] != RTR_SENT -> r2s!CTS(r, pp, 0, 0, 0); rSt[r] = R_SI;
        printf("matches r%d -> CTS\n", r)
     :: r == NR -> ux[nux] = pp; nux++; printf("unexpected\n")
     fi
  fi
}

inline settle()                 /* end of every receiver step */
{
  x = 1;                                               /* parked packets whose gap closed */
  do
  :: x <= NS && !(park[x] && x <= wm + 1) -> x++
  :: x <= NS && park[x] && x <= wm + 1 -> park[x] = 0; arrive(x, sTag[x], sLong[x]); x = 1
  :: else -> break
  od;
#if LAZY
  canLift = 0; i = 0;
  do
  :: i < posted ->
     if :: rSt[i] == R_POSTED && rRtr[i] == RTR_SUSP -> eligible(i); if :: ok -> canLift = 1 :: else fi
        :: else
     fi; i++
  :: else -> break
  od;
#else
  lift();
#endif
  x = 0;                                               /* probe: a notification waits for its gap */
  do
  :: x < NR -> if :: nfPsn[x] > wm + 1 -> HIT(16) :: else fi; x++
  :: else -> break
  od;
  skip
}

inline notified(rr)             /* R sees the notification of a DMA into receive rr */
{
  p = nfPsn[rr]; nfPsn[rr] = 0;
  printf("R: notification for r%d, psn %d tag %d -> r%d completes\n", rr, p, sTag[p], rr);
  if :: !seen[p] -> observe(p) :: else fi;
  if :: rSt[rr] == R_WAIT -> HIT(17) :: else fi;
  assert(rSt[rr] != R_WAIT || rWait[rr] == p);         /* (2) the RTS it waits on is this send */
  complete(rr, p)                                      /* the waiting RTS is served */
}

inline postRecv(kd, tt, qm, lng) /* R posts its next receive */
{
  i = posted; posted++;
  rTag[i] = tt; rQ[i] = qm; rLong[i] = lng;
  if
  :: kd == WILD -> printf("R: post r%d wildcard: ", i)
  :: kd == EXACT && lng -> printf("R: post r%d exact {%d}, long cap: ", i, tt)
  :: kd == EXACT && !lng -> printf("R: post r%d exact {%d}, eager cap: ", i, tt)
  :: kd == CLASSQ && lng -> printf("R: post r%d class {%d,%d}, long cap: ", i, tt, tt + 1)
  :: kd == CLASSQ && !lng -> printf("R: post r%d class {%d,%d}, eager cap: ", i, tt, tt + 1)
  fi;
  rSt[i] = R_POSTED;
  oraclePost(i);
  x = 0;
  do
  :: x < nux && !MATCHES(sTag[ux[x]], i) -> x++
  :: else -> break
  od;
  if
  :: x < nux ->                                       /* takes an unexpected message */
     p = ux[x];
     do
     :: x + 1 < nux -> ux[x] = ux[x + 1]; x++
     :: else -> break
     od;
     nux--; ux[nux] = 0;
     if
     :: sLong[p] -> r2s!CTS(i, p, 0, 0, 0); rSt[i] = R_SI; printf("takes unexpected RTS psn %d -> CTS\n", p); HIT(18)
     :: else -> deliverEager(i, p); printf("takes unexpected Env+D psn %d -> completes\n", p)
     fi
  :: else ->
     if
     :: kd != WILD && lng ->
        eligible(i);
        if :: ok -> printf("eligible\n"); sendRTR(i); HIT(21)
           :: else -> rRtr[i] = RTR_SUSP; printf("suspended\n"); HIT(19)
        fi
     :: else -> printf("no RTR\n")
     fi
  fi;
  settle()
}

#define POST(kd, tt, qm, lng)  :: posted < NR -> d_step { postRecv(kd, tt, qm, lng) }

active proctype Receiver()
{
end_r:
  do
  POST(WILD, 0, 3, 0)
  POST(EXACT, 0, 0, 0) POST(EXACT, 0, 0, 1) POST(EXACT, 1, 0, 0) POST(EXACT, 1, 0, 1)
  POST(CLASSQ, 0, 1, 0) POST(CLASSQ, 0, 1, 1)
#if NTAGS > 2
  POST(EXACT, 2, 0, 0) POST(EXACT, 2, 0, 1) POST(CLASSQ, 2, 1, 0) POST(CLASSQ, 2, 1, 1)
#endif
  :: d_step { s2r?RTS(p, tg)  -> arrive(p, tg, 1); settle() }
  :: d_step { s2r?ENVD(p, tg) -> arrive(p, tg, 0); settle() }
  :: d_step {
       s2r?NACK(r, x) ->
       if
       :: rSt[r] == R_WAIT -> r2s!CTS(r, rWait[r], 0, 0, 0); rSt[r] = R_SI; rRtr[r] = RTR_NACK;
          printf("R: NACK for r%d -> CTS for the waiting RTS psn %d\n", r, rWait[r]); rWait[r] = 0; HIT(12)
       :: rSt[r] == R_POSTED -> rRtr[r] = RTR_NACK; printf("R: NACK for r%d -> plain receive\n", r); HIT(13)
       :: else -> printf("R: NACK for r%d ignored (complete)\n", r); HIT(14)
       fi;
       settle()
     }
  :: d_step { NFREADY(0) -> notified(0); settle() }
  :: d_step { NFREADY(1) -> notified(1); settle() }
#if NR > 2
  :: d_step { NFREADY(2) -> notified(2); settle() }
#endif
#if NR > 3
  :: d_step { NFREADY(3) -> notified(3); settle() }
#endif
#if LAZY
  :: d_step { canLift -> lift(); settle() }
#endif
  od
}

/* ================= end-state check ================= */

active proctype Check()
{
  timeout ->                    /* nothing can move any more */
  d_step {
    assert(issued == NS && posted == NR);
    assert(empty(s2r) && empty(r2s));                  /* (4) nothing in flight */
    assert(wm == NS);
    p = 1;
    do
    :: p <= NS -> assert(!park[p]); p++                  /* (4) nothing parked */
    :: else -> break
    od;
    i = 0;
    do
    :: i < NR ->
       assert(nfPsn[i] == 0);
       assert(rMatch[i] == oMatch[i]);                  /* (1) matching == reference */
       if
       :: oMatch[i] != 0 -> assert(rSt[i] == R_DONE && writes[i] == 1)          /* (3) */
       :: else -> assert(rSt[i] == R_POSTED && (rRtr[i] != RTR_SENT || stK[i] != 0))
       fi;
       assert(stK[i] == 0 || oMatch[i] == 0);           /* (4) no stored RTR of a done receive */
       i++
    :: else -> break
    od;
    n = 0; p = 1;
    do
    :: p <= NS ->
       if
       :: oUx[p] -> n++; assert(deliv[p] == 0)           /* left unmatched by the reference too */
       :: else -> assert(deliv[p] == 1 && sSt[p] == S_DONE)                    /* (2),(3) */
       fi; p++
    :: else -> break
    od;
    assert(nux == n);                                   /* (4) unexpected == reference leftovers */
    if :: n == 0 -> HIT(20) :: else fi;                 /* probe: a run where everything matched */
    x = 0;
    do
    :: x < nux -> assert(oUx[ux[x]]); x++
    :: else -> break
    od;
    skip
  }
}
