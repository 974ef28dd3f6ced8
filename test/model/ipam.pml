/*
 * serverless-eni-ipam: the allocator, the release, the sync and a Cilium agent, at the level of
 * their reads and conditional writes, for ONE node (one ENI slot with two secondary-IP slots).
 *
 * Every `STEP` is one read or one write of one system (the node table item, EC2, the CiliumNode);
 * between two steps every other actor may run, and every invocation of ours may crash before any
 * step (bounded by MAXFAULTS; a crash after the last step is the same as finishing). Purely local
 * planning is folded into the step that acts on it (nobody else can observe it).
 *
 * Node leases (functions/README.md, "Node leases"). A lease lasts from each write of it; a holder
 * that is gone leaves it to expire ([lease-expiry]). A lease may also LAPSE WHILE ITS HOLDER STILL
 * RUNS ([lease-lapse]: a pause, renewals that failed; counted within MAXFAULTS): the next
 * invocation may then take the node, while the old holder goes on with its steps. What keeps the
 * two apart: every write of the old holder is conditional on the version it last wrote, so it
 * fails once the node was taken, and every EC2 mutation goes through the fence ([lease-fence]):
 * a holder whose lease lapsed renews it first, on that version, and stops when that fails.
 * Timing assumption (the one NodeLease states): the fence lets a call through with at least the
 * margin (5 s) of lease left, a call reaches EC2 within the margin and the invocations' clocks
 * agree to well within it. So no lapse falls between the fence and the call's effect in EC2 (they
 * are one step), and a lapse in the middle of a call, AssignPrivateIpAddresses included, is a lapse
 * after its effect: the next holder's observation reads EC2 first-hand after it and counts the
 * address, so nobody asks for it twice (one_assign_per_need).
 * test/model/mapping.json names the function in functions/ behind every bracketed step label below.
 *
 * Configurations (-D at `spin -a` time, see test/model/verify.ts):
 *   AGENT=19   a 1.12-1.19 agent: spec.ipam.pool, status.ipam.used, the release-ips handshake
 *   AGENT=20   a 1.20 multi-pool agent: spec.ipam.pools.requested/allocated from status.eni.enis
 *   FOREIGN    the CiliumNode of our node name belongs to another instance
 *   CIDR_RELEASE  (AGENT=20) the sweep runs the multi-pool CIDR release: a withdrawn CIDR is
 *              unassigned only once the CiliumNode carries the record version that withdrew it
 *   RESTORE=1  the node table is replaced, once, by a new empty table (see `Restore` below)
 *   RESTORE=2  ... by a point-in-time restore: the record as it was at an earlier moment
 *   OLD_SYNCS  (RESTORE) syncs of the deployment before the switch may still run after it
 *   NO_RESTART_BESIDE_OLD_SYNCS  (OLD_SYNCS) no agent restart while one does: see the open hazard
 *              at RESTART_ALLOWED below
 *   LIVENESS   the never claim `served` (run with weak fairness, pan -a -f)
 * Known-wrong variants the checker must reject (each a -D switch):
 *   MUT_TWO_PLACE     cilium before #19923: the pool comes from a second, later read of the state
 *   MUT_SPEC_FIRST    the sync writes the pool before the ENIs it references
 *   MUT_UNGUARDED     CiliumNode patches without the resourceVersion test
 *   MUT_NO_HANDSHAKE  excess IPs unassigned without the release-ips handshake
 *   MUT_BLIND_PUT     node-record writes without the version condition
 *   MUT_TABLE_BLIND   (RESTORE) the sync ignores the record-table annotation: it compares the new
 *                     table's versions with the old table's count and takes its records for stale
 *   MUT_ADOPT_UNRECONCILED  (RESTORE) the sync publishes a record whose EC2 stamp names another
 *                     table (a restored item, not yet reconciled with EC2 in the table it lives in)
 *   MUT_TABLES_UNORDERED    (RESTORE) the sync of an older table writes over a CiliumNode a newer
 *                     table's record has claimed (both take the other's annotation for foreign)
 *   MUT_UNASSIGN_BEFORE_PUBLISHED  (CIDR_RELEASE) a withdrawn CIDR is unassigned as soon as status
 *                     and allocated lack it, whatever record version the CiliumNode carries
 *   MUT_NO_CLAIM      the allocation calls EC2 without first claiming the node (no lease write)
 *   MUT_LAPSED_BLIND_WRITE  a holder whose lease lapsed records what EC2 confirmed without the
 *                     version condition (it takes itself for the holder still): it writes over the
 *                     next holder's record
 *   MUT_UNFENCED      EC2 mutations without the fence: a holder whose lease lapsed and was taken
 *                     calls EC2 next to the new holder
 *   MUT_WITHDRAW_ALLOCATED  (CIDR_RELEASE) the sync withholds every withdrawing CIDR, also one the
 *                     agent lists in spec.ipam.pools.allocated
 *   MUT_UNGUARDED with AGENT=20 CIDR_RELEASE: a status write planned from a version whose
 *                     allocated lacked the CIDR lands after the agent took it again
 * Not modelled: the CiliumNode watcher. It only decides WHEN an allocate invocation runs, and the
 * model already lets one start at any moment (and, for liveness, assumes one eventually does), so
 * every watcher, a correct one or one that ignores its resume point, is covered; what the resume
 * point saves (a full list and repeated invocations per watcher start) is cost, not an outcome.
 */

#ifndef AGENT
#define AGENT 19
#endif
#ifndef MAXFAULTS
#define MAXFAULTS 1
#endif
#ifndef PODOPS
#define PODOPS 2
#endif
#ifndef ALLOCATORS
#define ALLOCATORS 2
#endif
#ifndef SYNCS
#define SYNCS 2
#endif

#define NI 2          /* secondary-IP slots on the ENI */
#define PRE 1         /* spec.ipam.pre-allocate */
#define ME 1          /* our instance */
#define OTHER 2       /* another instance */

/* status.ipam.release-ips, as published on the CiliumNode */
#define R_NONE 0
#define R_MARKED 1
#define R_READY 2
#define R_DONOT 3
#define R_RELEASED 4
/* the record's excess marks (NodeRecord.excessMarks[ip].state) */
#define M_NONE 0
#define M_MARKED 1
#define M_READY 2
#define M_RELEASED 3
#define M_PENDING 4   /* marked, without a state yet: inside the release delay */

#define bit(i) (1 << (i))
#define has(m, i) ((((m) >> (i)) & 1) == 1)
#define count(m) (((m) & 1) + (((m) >> 1) & 1))
#define leaving(mk) ((mk) == M_READY || (mk) == M_RELEASED)

mtype = { spec_claim, status, spec };
mtype = { status_covers_spec, never_backwards, no_lost_update, one_eni_per_slot,
          one_assign_per_need, in_use_kept, right_node_only, derivable_assigned, allocated_kept };

#define CHECK(p, cond) if :: (cond) -> skip :: else -> printf("PROPERTY %e VIOLATED\n", p); assert(false) fi

/*
 * One step with an effect (a write, an EC2 call) of an invocation of ours, or a crash in its
 * place. Reads get no crash of their own: crashing before a read is the same as crashing before
 * the next effect, since a read changes nothing anyone else sees.
 * The `true` that opens the step is needed: SPIN takes an `else` as executable only when no other
 * option at the same control point is, and without it the first `if` of `body` would share its
 * control point with the crash option. Its `else` (a lost version condition, a patch that failed
 * its resourceVersion test, the second address of an assignment, a record already up to date)
 * would then be blocked while a crash is still in the budget, and the step could only crash:
 * whole interleavings (an assignment of a second address, then an agent restart) would go
 * unexplored.
 */
#define STEP(body) if :: atomic { faults < MAXFAULTS -> faults++; printf("  process %d CRASHES here\n", _pid); goto crashed } :: atomic { true; body } fi
#define READ(body) atomic { body }

/* ---- EC2: the instance's ENI in device slot 1 ---- */
byte eniSt;          /* 0 none, 1 available (created, not attached), 2 attached */
byte eniIps;         /* secondary-IP slots assigned to it */

/* ---- the node table item ---- */
byte rVer;           /* 0: no item; versions are kept dense, see `renumber` */
byte rFresh;         /* allocators whose read of the item is still its current version */
byte rLease;         /* 0, or the allocator process holding the mutation lease */
bool rEni;           /* the ENI is recorded */
byte rIps;           /* its recorded IPs */
bool rStamp;         /* the table whose EC2 observation the content was reconciled in (reconciledInTable) */
byte rMark[NI];
byte rWd[NI];        /* CIDR_RELEASE: a withdrawing entry's withdrawnInVersion (W), else 0 */
bool leaseAlive;     /* the invocation that wrote the lease is still running */
bool leaseExpired;   /* the lease's expiry time has passed (its holder gone, or lapsed while it runs) */
byte lapsed;         /* allocators whose own lease's expiry passed while they ran (each knows it by
                        its clock) and that have not renewed it since */

/* ---- the CiliumNode ---- */
byte cFresh;         /* syncs whose read (or write response) is still the current resourceVersion */
byte cOwner = ME;    /* spec.instance-id */
byte cAnn;           /* the record-version annotation; 0: absent */
bool cTab;           /* the record-table annotation: the table generation cAnn counts in (0 while
                        cAnn is absent); generations are ordered by creation: table 1 is newer */
bool cStEni;         /* status.eni.enis has the ENI */
byte cStIps;         /* ... with these addresses */
byte cPool;          /* spec.ipam.pool (every entry's resource is the ENI) */
byte cUsed;          /* status.ipam.used (1.19 agent) */
byte cRel[NI];       /* status.ipam.release-ips */
byte cReq;           /* spec.ipam.pools.requested default ipv4-addrs (1.20 agent) */
byte cAlloc;         /* spec.ipam.pools.allocated: /32 CIDRs (1.20 agent) */

/* ---- ghosts: what the properties talk about ---- */
byte holds;          /* IPs the agent has handed to pods (its memory, ahead of any write) */
byte pubVer;         /* highest record version any sync write has carried to the CiliumNode */
byte faults;         /* crashes and agent restarts so far */
byte podOps;         /* pod starts and stops so far */
byte xVer[2];        /* each sync's record read */
byte sAnn[2];        /* each sync's read of the annotation */
byte aWd[NI];        /* CIDR_RELEASE: rWd as the release invocation read it (only allocator 1 releases) */

/* ---- the table restore (RESTORE): tables are 0, the original, and 1, its replacement ---- */
bool rTab;           /* the table the functions are deployed against; rVer.. above are its item */
bool xTab[2];        /* the table each sync reads: rTab when it starts, kept to its end */
byte pubVerNew;      /* ghost: pubVer for the versions of table 1 */
byte busy;           /* ghost: allocate and sweep invocations running (first read to end) */
byte oVer; bool oEni, oStamp; byte oIps, oMark0, oMark1;    /* table 0's item as the switch left it */
bool bkAt, bkEni, bkStamp; byte bkIps, bkMark0, bkMark1;     /* the item at the restore point (RESTORE=2) */

/* scratch for computations inside one step (not part of the state) */
hidden int u, u1, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11;
/* the real version numbers, for the printed counterexamples only (nothing depends on them) */
hidden byte realVer, realAnn, realRead[2], realOld, realBk;
hidden int headroom;
hidden byte withheld;
hidden byte target, excess, wantedPool, tStIps, tPool, tRel0, tRel1, step, xUsed, xPool, xRel0, xRel1;
hidden byte tStEni, claimed, trusted, multiPool;

/*
 * Record versions are compared only with each other (equal, older, newer), so the model keeps
 * them dense: after every change each live version value is replaced by its rank. This keeps the
 * state space finite while every comparison gives the same answer as with the real numbers.
 */
#define PC(x) ((((x) >> 1) & 1) + (((x) >> 2) & 1) + (((x) >> 3) & 1) + (((x) >> 4) & 1) + \
               (((x) >> 5) & 1) + (((x) >> 6) & 1) + (((x) >> 7) & 1) + (((x) >> 8) & 1) + \
               (((x) >> 9) & 1) + (((x) >> 10) & 1))
#define RANK(v) ((v) == 0 -> 0 : PC(u & ((1 << (v)) - 1)) + 1)
#ifndef RESTORE
#ifdef CIDR_RELEASE
/* the withdrawal versions are record versions too: ranked with the others */
#define RANK_WITHDRAWN \
  u = u | (1 << rWd[0]) | (1 << rWd[1]) | (1 << aWd[0]) | (1 << aWd[1]); \
  n8 = RANK(rWd[0]); n9 = RANK(rWd[1]); n10 = RANK(aWd[0]); n11 = RANK(aWd[1])
#define RENUMBER_WITHDRAWN rWd[0] = n8; rWd[1] = n9; aWd[0] = n10; aWd[1] = n11
#else
#define RANK_WITHDRAWN skip
#define RENUMBER_WITHDRAWN skip
#endif
inline renumber() {
  u = (1 << rVer) | (1 << cAnn) | (1 << pubVer) | (1 << xVer[0]) | (1 << xVer[1]) |
      (1 << sAnn[0]) | (1 << sAnn[1]);
  RANK_WITHDRAWN;
  n1 = RANK(rVer); n2 = RANK(cAnn); n3 = RANK(pubVer); n4 = RANK(xVer[0]); n5 = RANK(xVer[1]);
  n6 = RANK(sAnn[0]); n7 = RANK(sAnn[1]);
  rVer = n1; cAnn = n2; pubVer = n3; xVer[0] = n4; xVer[1] = n5; sAnn[0] = n6; sAnn[1] = n7;
  RENUMBER_WITHDRAWN
}
#else
#ifdef CIDR_RELEASE
#error "CIDR_RELEASE is not modelled with RESTORE"
#endif
#ifdef MUT_UNGUARDED
#error "MUT_UNGUARDED is not modelled with RESTORE"
#endif
/*
 * With two tables a version counts only in its own table: each table's versions are ranked on
 * their own (u: table 0's, u1: table 1's; bit 0 stands for "not of this table").
 */
#define RANK_IN(s, v) ((v) == 0 -> 0 : PC((s) & ((1 << (v)) - 1)) + 1)
#define OF(t, tab, v) ((t) == (tab) -> (1 << (v)) : 1)
#define RANK_OF(t, v) ((t) -> RANK_IN(u1, v) : RANK_IN(u, v))
inline renumber() {
  u = OF(rTab, 0, rVer) | OF(cTab, 0, cAnn) | (1 << pubVer) | OF(xTab[0], 0, xVer[0]) |
      OF(xTab[1], 0, xVer[1]) | (1 << oVer);
  u1 = OF(rTab, 1, rVer) | OF(cTab, 1, cAnn) | (1 << pubVerNew) | OF(xTab[0], 1, xVer[0]) |
       OF(xTab[1], 1, xVer[1]);
  n1 = RANK_OF(rTab, rVer); n2 = RANK_OF(cTab, cAnn); n3 = RANK_IN(u, pubVer);
  n4 = RANK_OF(xTab[0], xVer[0]); n5 = RANK_OF(xTab[1], xVer[1]); n6 = RANK_IN(u1, pubVerNew);
  n7 = RANK_IN(u, oVer);
  rVer = n1; cAnn = n2; pubVer = n3; xVer[0] = n4; xVer[1] = n5; pubVerNew = n6; oVer = n7
}
#endif

/* Checked after every change to the CiliumNode or to EC2: what a watcher can observe. */
inline observable() {
  CHECK(status_covers_spec, (cPool & ~cStIps) == 0 && (cPool == 0 || cStEni));
#if AGENT == 19
  CHECK(in_use_kept, (holds & ~cPool) == 0 && (holds & ~eniIps) == 0);
#else
  CHECK(allocated_kept, (cAlloc & ~cStIps) == 0 && (cAlloc == 0 || cStEni));
  CHECK(derivable_assigned, !cStEni || (eniSt == 2 && (cStIps & ~eniIps) == 0));
  CHECK(in_use_kept, (holds & ~eniIps) == 0);
#endif
}

/* The target IP count: cilium's pre-allocate over the demand (pool-math calculateNeededIps). */
inline demandTarget() {
  if
  :: cOwner != ME -> target = PRE   /* a foreign CiliumNode is not trusted: stack defaults */
  :: cOwner == ME && cReq > 0 && cUsed == 0 ->   /* multi-pool: used = requested - P */
     target = (cReq > PRE -> cReq - PRE : 0) + PRE
  :: else -> target = count(cUsed) + PRE
  fi;
  if :: target > NI -> target = NI :: else fi
}

/* [record-put] conditional Put on the version read (MUT_BLIND_PUT: on nothing). */
#ifdef MUT_BLIND_PUT
#define VERSION_MATCHES true
#else
#define VERSION_MATCHES has(rFresh, me - 1)
#endif
/* MUT_LAPSED_BLIND_WRITE: a holder whose lease lapsed writes without the condition */
#ifdef MUT_LAPSED_BLIND_WRITE
#define CONTENT_MATCHES (VERSION_MATCHES || has(lapsed, me - 1))
#else
#define CONTENT_MATCHES VERSION_MATCHES
#endif

/* stamps: the writer observed EC2 for this table (allocateOnce), so the content is stamped with it
   (reconciledInTable); every other writer keeps the stamp it read (nextNodeRecord) */
#define RECORD_PUT(eni, ips, m0, m1, withLease, onConflict, stamps) \
    if \
    :: CONTENT_MATCHES -> \
       if :: !VERSION_MATCHES -> printf("  allocator %d writes after its lease lapsed, without the version condition\n", me) :: else fi; \
       /* no lost update: the new content keeps every recorded IP EC2 still has */ \
       CHECK(no_lost_update, ((rIps & eniIps) & ~(ips)) == 0); \
       rVer = rVer + 1; realVer++; \
       WITHDRAWN_IN(0, m0); WITHDRAWN_IN(1, m1); \
       rEni = eni; rIps = ips; rMark[0] = m0; rMark[1] = m1; \
       if :: stamps -> rStamp = rTab :: else fi; \
       if :: withLease -> rLease = me; leaseAlive = true; mine = true \
          :: else -> rLease = 0; leaseAlive = false; mine = false fi; \
       leaseExpired = false; lapsed = lapsed & ~bit(me - 1);   /* each write renews */ \
       rFresh = bit(me - 1);   /* the writer goes on from the version it wrote */ \
       renumber(); \
       printf("  allocator %d writes record v%d: eni=%d ips=%d marks=%d,%d lease=%d stamp=table %d\n", me, realVer, rEni, rIps, rMark[0], rMark[1], rLease, rStamp) \
    :: else -> printf("  allocator %d: record write fails its version condition\n", me); onConflict \
    fi

#define leasedByOther (rLease != 0 && !mine && !leaseExpired)

/*
 * [lease-fence] NodeLease.beforeMutation, in front of every EC2 mutation (fencedNetwork): a holder
 * whose lease lapsed renews it first (the record as it stands, the next version), conditional on
 * the version it last wrote, and the call waits for that write; when the write fails (the node was
 * taken: LeaseLostError) the invocation ends before the call. One step with the mutation it guards
 * (the timing assumption in the header). MUT_UNFENCED: the call goes out on a lapsed lease.
 */
#ifdef MUT_UNFENCED
#define FENCE skip
#else
#define FENCE \
    if \
    :: has(lapsed, me - 1) && VERSION_MATCHES -> \
       rVer = rVer + 1; realVer++; rLease = me; leaseAlive = true; leaseExpired = false; \
       lapsed = lapsed & ~bit(me - 1); rFresh = bit(me - 1); renumber(); \
       printf("  allocator %d renews its lapsed lease before calling EC2: record v%d\n", me, realVer) \
    :: has(lapsed, me - 1) && !VERSION_MATCHES -> \
       printf("  allocator %d: the renewal of its lapsed lease fails its version condition; no EC2 call\n", me); \
       goto finished \
    :: else \
    fi
#endif

/* An allocate or sweep invocation runs from its first read to its end (for the table restore). */
#ifdef RESTORE
#define STARTS busy = busy | bit(me - 1)
#define ENDS busy = busy & ~bit(me - 1)
#else
#define STARTS skip
#define ENDS skip
#endif

/*
 * 1.20 multi-pool nodes: the record's entries (NodeRecord.cidrReleases, in rMark for AGENT=20)
 * and planCidrRelease's rules for one /32 CIDR.
 */
#define C_NONE 0
#define C_PENDING 1
#define C_WITHDRAWING 2
#define C_RELEASED 3   /* a tombstone: a Describe still listing it is not believed */
/*
 * [cidr-release-withdrawn-in] withWithdrawalVersions: the record write that makes an entry
 * withdrawing stamps it with its own version W; a write that keeps it withdrawing keeps W (it is
 * conditional on the version read, so the entry it keeps is the current one). The model forgets W
 * once the entry leaves withdrawing (the code keeps it on the tombstone, where nothing reads it).
 * Needs the version already incremented and the old entry still in rMark (see RECORD_PUT).
 */
#if AGENT == 20 && defined(CIDR_RELEASE)
#define WITHDRAWN_IN(i, m) \
    if \
    :: (m) != C_WITHDRAWING -> rWd[i] = 0 \
    :: (m) == C_WITHDRAWING && rMark[i] != C_WITHDRAWING -> rWd[i] = rVer; \
       printf("  (the next write makes ip%d withdrawing: W = v%d)\n", i, realVer) \
    :: else \
    fi
/*
 * [cidr-release-carries-withdrawal] the CiliumNode's record-version annotation is W or newer
 * (appliedRecordVersion, one table here): from then on no sync write carries an older record,
 * since the sync reads the CiliumNode before the record and every patch tests the resourceVersion.
 * MUT_UNASSIGN_BEFORE_PUBLISHED drops the condition.
 */
#ifdef MUT_UNASSIGN_BEFORE_PUBLISHED
#define CARRIES_WITHDRAWAL(w) true
#else
#define CARRIES_WITHDRAWAL(w) (cAnn != 0 && cAnn >= (w))
#endif
#define WITHDRAWALS_CARRIED(set) \
    ((!has(set, 0) || CARRIES_WITHDRAWAL(aWd[0])) && (!has(set, 1) || CARRIES_WITHDRAWAL(aWd[1])))
#define READ_WITHDRAWN aWd[0] = rWd[0]; aWd[1] = rWd[1]
/* the end of an invocation of allocator 1: its read of rWd is forgotten if it was the release */
#define FORGET_WITHDRAWN if :: releasing -> aWd[0] = 0; aWd[1] = 0 :: else fi
#else
#define WITHDRAWN_IN(i, m) skip
#define CARRIES_WITHDRAWAL(w) true
#define WITHDRAWALS_CARRIED(set) true
#define READ_WITHDRAWN skip
#define FORGET_WITHDRAWN skip
#endif
#if AGENT == 20
#define TOMBSTONED(m0, m1) (((m0) == C_RELEASED -> 1 : 0) | ((m1) == C_RELEASED -> 2 : 0))
#define REASSIGNED(added) \
    if :: has(added, 0) && aMark0 == C_RELEASED -> aMark0 = C_NONE :: else fi; \
    if :: has(added, 1) && aMark1 == C_RELEASED -> aMark1 = C_NONE :: else fi
/* withdrawing CIDRs, less those `allocated` lists in the version read (MUT_WITHDRAW_ALLOCATED: all) */
#ifdef MUT_WITHDRAW_ALLOCATED
#define WITHHELD(m0, m1) (((m0) == C_WITHDRAWING -> 1 : 0) | ((m1) == C_WITHDRAWING -> 2 : 0))
#else
#define WITHHELD(m0, m1) ((((m0) == C_WITHDRAWING -> 1 : 0) | ((m1) == C_WITHDRAWING -> 2 : 0)) & ~S_Alloc)
#endif
#else
#define TOMBSTONED(m0, m1) 0
#define REASSIGNED(added) skip
#define WITHHELD(m0, m1) 0
#endif
#define PUBLISHED(i) (cStEni && has(cStIps, i))
#define NEXT_CIDR(i, m, n) \
    n = m; \
    if \
    :: m == C_RELEASED -> n = C_NONE   /* the tombstone expires (EC2 reads are consistent here) */ \
    :: m != C_RELEASED && m != C_NONE && !has(aIps, i) -> n = C_RELEASED   /* gone from EC2 */ \
    :: m != C_RELEASED && m != C_NONE && has(aIps, i) && !multiPool -> n = C_NONE \
    :: m != C_RELEASED && m != C_NONE && has(aIps, i) && multiPool && has(cAlloc, i) -> n = C_NONE \
    :: m == C_WITHDRAWING && has(aIps, i) && multiPool && !has(cAlloc, i) && !PUBLISHED(i) && \
       CARRIES_WITHDRAWAL(aWd[i]) -> \
       unassign = unassign | bit(i); n = C_RELEASED \
    :: else \
    fi; \
    if \
    :: multiPool && has(aIps, i) && !has(cAlloc, i) && n == C_NONE && m == C_NONE -> n = C_PENDING \
    :: multiPool && has(aIps, i) && !has(cAlloc, i) && n == C_PENDING && m == C_PENDING && headroom >= 1 -> \
       n = C_WITHDRAWING; headroom = headroom - 1   /* the release delay has elapsed */ \
    :: else \
    fi

/*
 * One allocate invocation (allocate-node allocateNode / allocateOnce), also what the sweep runs
 * for a node that needs it. A conflict ends it (allocateNode re-plans; the next event or sweep
 * does the same).
 */
inline allocateInvocation() {
  /* [allocate-observe] record, attached ENIs and the CiliumNode's demand, read at once */
  READ(
    if :: leasedByOther -> goto finished :: else fi;   /* busy: another invocation holds the node */
    STARTS; rFresh = rFresh | bit(me - 1); aMark0 = rMark[0]; aMark1 = rMark[1];
    aEni = (eniSt == 2); aIps = (eniSt == 2 -> eniIps : 0) & ~TOMBSTONED(aMark0, aMark1);
    demandTarget(); aTarget = target; target = 0;
    printf("allocator %d: allocate reads record v%d (ips=%d) and EC2 (eni=%d ips=%d); wants %d IPs\n", me, realVer, rIps, eniSt, eniIps, aTarget)
  );
  do
  :: aEni && count(aIps) >= aTarget -> break   /* [allocate-plan] nothing needed */
  :: else ->
     /* [allocate-claim] / [allocate-progress] the lease, conditional on the version read
        (MUT_NO_CLAIM: no write, EC2 is called on the record as read) */
#ifdef MUT_NO_CLAIM
     skip;
#else
     STEP(RECORD_PUT(aEni, aIps, aMark0, aMark1, true, goto finished, true));
#endif
     if
     :: !aEni ->
        /* [allocate-adopt] an ENI created for this instance but never attached, else
           [allocate-create] CreateNetworkInterface with the deterministic ClientToken */
        STEP(
          FENCE;
          if
          :: eniSt == 1 -> printf("  allocator %d adopts the unattached ENI\n", me)
          :: eniSt == 0 -> eniSt = 1; eniIps = 1; printf("  allocator %d: EC2 CreateNetworkInterface (ip0)\n", me)
          :: else -> CHECK(one_eni_per_slot, false)   /* attached meanwhile: a second ENI */
          fi
        );
        /* [allocate-attach] AttachNetworkInterface at the planned device index */
        STEP(
          FENCE;
          CHECK(one_eni_per_slot, eniSt == 1);
          eniSt = 2; aEni = true; aIps = eniIps;
          printf("  allocator %d: EC2 AttachNetworkInterface\n", me);
          observable()
        )
     :: else ->
        /* [allocate-assign] AssignPrivateIpAddresses: EC2 picks a free address (not idempotent).
           one_assign_per_need: the caller has counted every address EC2 holds on the ENI (one it
           tombstoned aside: a Describe still listing it is not believed), so it asks for an
           address nobody else asked for since its observation */
        STEP(
          FENCE;
          CHECK(one_assign_per_need, (eniIps & ~aIps & ~TOMBSTONED(aMark0, aMark1)) == 0);
          if
          :: !has(eniIps, 0) -> eniIps = eniIps | bit(0)
          :: else -> eniIps = eniIps | bit(1)
          fi;
          REASSIGNED(eniIps & ~aIps);   /* a tombstoned CIDR EC2 assigned again: its entry goes */
          aIps = eniIps;
          printf("  allocator %d: EC2 AssignPrivateIpAddresses -> ips=%d\n", me, eniIps);
          observable()
        )
     fi
  od;
  if
  :: mine ->
     /* [allocate-release-lease] record what EC2 confirmed and give the lease back */
     STEP(RECORD_PUT(aEni, aIps, aMark0, aMark1, false, skip, true))
  :: else ->
     /* [allocate-record] nothing to do in EC2: write only if the record differs from EC2, or
        [allocate-stamp] was not reconciled with EC2 in this table (a restored item) */
     STEP(if :: aEni != rEni || aIps != rIps || rStamp != rTab -> RECORD_PUT(aEni, aIps, aMark0, aMark1, false, skip, true) :: else fi)
  fi
}

/* planRelease's rules (e), (a), (c), (b), (d) for one IP; an unassignment makes it `released`. */
#define NEXT_MARK(i, m, n, ans) \
    n = m; \
    if \
    :: m == M_RELEASED -> \
       if :: has(aIps, i) || ans == R_NONE -> n = M_NONE :: else fi \
    :: m != M_RELEASED && !has(excess, i) -> \
       if :: m == M_READY && !has(aIps, i) -> n = M_RELEASED :: else -> n = M_NONE fi \
    :: m == M_NONE && has(excess, i) -> n = M_PENDING \
    :: m == M_PENDING && has(excess, i) -> \
       DELAY_ELAPSED(ans, n) \
    :: (m == M_MARKED || m == M_READY) && has(excess, i) && ans == R_DONOT -> n = M_NONE \
    :: m == M_MARKED && has(excess, i) && ans == R_READY -> n = M_READY \
    :: m == M_READY && has(excess, i) && ans != R_DONOT -> \
       if :: !has(xPool, i) && !has(xUsed, i) -> unassign = unassign | bit(i); n = M_RELEASED :: else fi \
    :: else \
    fi

/*
 * (b) the release delay has elapsed. Timing assumption (test/README.md): the delay (180 s by default) is
 * longer than it takes the sync to drop a release-ips entry the record no longer marks, so an
 * answer left over from an aborted handshake is gone by then. ZERO_DELAY drops the assumption
 * and shows why it is needed: the stale `ready-for-release` is taken for an answer to the new mark.
 */
#ifdef ZERO_DELAY
#define DELAY_ELAPSED(ans, n) n = M_MARKED
#else
#define DELAY_ELAPSED(ans, n) if :: ans == R_NONE -> n = M_MARKED :: else fi
#endif

#ifdef MUT_NO_HANDSHAKE
#define NEXT_MARKS() unassign = excess; nMark0 = M_NONE; nMark1 = M_NONE
#else
#define NEXT_MARKS() NEXT_MARK(0, aMark0, nMark0, xRel0); NEXT_MARK(1, aMark1, nMark1, xRel1)
#endif
#if AGENT == 20
#define UNASSIGN_CHECK_ALLOCATED CHECK(allocated_kept, (cAlloc & unassign) == 0)
#else
#define UNASSIGN_CHECK_ALLOCATED skip
#endif

/*
 * One release invocation (release-excess releaseExcess / releaseOnce with planRelease): the
 * operator side of the 1.19 handshake; the marks live in the record and the sync publishes them.
 */
inline releaseInvocation() {
  /* [release-read-record] */
  READ(
    if :: rVer == 0 || leasedByOther -> goto finished :: else fi;   /* no record yet, or busy */
    STARTS; rFresh = rFresh | bit(me - 1); aMark0 = rMark[0]; aMark1 = rMark[1];
    printf("allocator %d: release reads record v%d (marks=%d,%d)\n", me, realVer, aMark0, aMark1)
  );
  /* [release-observe] the CiliumNode and the attached ENIs, read at once, and
     [release-plan] planRelease: the excess set, each mark's next state, what to unassign */
  READ(
    aEni = (eniSt == 2); aIps = (eniSt == 2 -> eniIps : 0);
    trusted = (cOwner == ME);
    xUsed = (trusted -> cUsed : 0); xPool = (trusted -> cPool : 0);
    xRel0 = (trusted -> cRel[0] : R_NONE); xRel1 = (trusted -> cRel[1] : R_NONE);
    multiPool = trusted && cReq > 0 && cUsed == 0;
    demandTarget();
    excess = 0;
    if
    :: !multiPool && aEni && count(aIps) > target ->
       /* computeExcessIps: one unused secondary IP, the highest slot first */
       if
       :: has(aIps, 1) && !has(xUsed, 1) -> excess = bit(1)
       :: else -> if :: has(aIps, 0) && !has(xUsed, 0) -> excess = bit(0) :: else fi
       fi
    :: else
    fi;
    unassign = 0;
    NEXT_MARKS();
    printf("  allocator %d: release reads CiliumNode (used=%d pool=%d release-ips=%d,%d) and EC2 (ips=%d): marks -> %d,%d, unassign %d\n", me, xUsed, xPool, xRel0, xRel1, aIps, nMark0, nMark1, unassign);
    target = 0; excess = 0; xUsed = 0; xPool = 0; xRel0 = 0; xRel1 = 0; trusted = false; multiPool = false
  );
  if
  :: nMark0 == aMark0 && nMark1 == aMark1 && unassign == 0 -> skip   /* nothing to do */
  :: unassign == 0 && (nMark0 != aMark0 || nMark1 != aMark1) ->
     /* [release-update-marks] one conditional write, no EC2 call */
     STEP(RECORD_PUT(aEni, aIps, nMark0, nMark1, false, skip, false))
  :: unassign != 0 ->
     /* [release-claim] the lease, conditional on the version read */
     STEP(RECORD_PUT(aEni, aIps, aMark0, aMark1, true, goto finished, false));
     /* [release-unassign] UnassignPrivateIpAddresses */
     STEP(
       FENCE;
       CHECK(in_use_kept, (holds & unassign) == 0 && (cUsed & unassign) == 0);
       UNASSIGN_CHECK_ALLOCATED;
       eniIps = eniIps & ~unassign; aIps = aIps & ~unassign;
       printf("  allocator %d: EC2 UnassignPrivateIpAddresses %d -> ips=%d\n", me, unassign, eniIps);
       observable()
     );
     /* [release-record] what EC2 confirmed, the marks, the lease given back */
     STEP(RECORD_PUT(aEni, aIps, nMark0, nMark1, false, skip, false))
  fi
}

/*
 * One multi-pool release invocation (release-cidrs releaseMultiPoolCidrs / releaseCidrsOnce with
 * planCidrRelease): a CIDR the agent dropped from allocated goes pending, then withdrawing in record
 * version W (the sync withdraws it from pool and status only from a version whose allocated lacks
 * it), then, once the CiliumNode carries W and lacks it, is unassigned after a fresh re-check, and
 * tombstoned.
 */
inline releaseCidrsInvocation() {
  /* [cidr-release-read-record] */
  READ(
    if :: rVer == 0 || leasedByOther -> goto finished :: else fi;
    STARTS; rFresh = rFresh | bit(me - 1); aMark0 = rMark[0]; aMark1 = rMark[1]; READ_WITHDRAWN;
    printf("allocator %d: CIDR release reads record v%d (entries=%d,%d)\n", me, realVer, aMark0, aMark1)
  );
  /* [cidr-release-observe] the CiliumNode and the attached ENIs at once, and
     [cidr-release-plan] planCidrRelease */
  READ(
    aEni = (eniSt == 2); aIps = (eniSt == 2 -> eniIps : 0) & ~TOMBSTONED(aMark0, aMark1);
    multiPool = (cOwner == ME && cReq > 0 && cUsed == 0);
    headroom = count(aIps) - cReq;
    unassign = 0;
    NEXT_CIDR(0, aMark0, nMark0);
    NEXT_CIDR(1, aMark1, nMark1);
    printf("  allocator %d: CIDR release reads CiliumNode (ann=v%d requested=%d allocated=%d status ips=%d) and EC2 (ips=%d): entries -> %d,%d, unassign %d\n", me, realAnn, cReq, cAlloc, cStIps, aIps, nMark0, nMark1, unassign);
    multiPool = false; headroom = 0
  );
  if
  :: nMark0 == aMark0 && nMark1 == aMark1 && unassign == 0 -> skip
  :: unassign == 0 && (nMark0 != aMark0 || nMark1 != aMark1) ->
     /* [cidr-release-update] the entries only: one conditional write */
     STEP(RECORD_PUT(aEni, aIps, nMark0, nMark1, false, skip, false))
  :: unassign != 0 ->
     /* [cidr-release-claim] */
     STEP(RECORD_PUT(aEni, aIps, aMark0, aMark1, true, goto finished, false));
     /* [cidr-release-recheck] a fresh CiliumNode read right before the call */
     READ(
       if
       :: !(cOwner == ME && cReq > 0 && cUsed == 0) || (cAlloc & unassign) != 0 || (cStEni && (cStIps & unassign) != 0) ||
          !WITHDRAWALS_CARRIED(unassign) ->
          printf("  allocator %d: the CIDR is wanted again, or its withdrawal is not on the CiliumNode; not releasing it\n", me);
          if :: has(unassign, 0) -> nMark0 = aMark0 :: else fi;
          if :: has(unassign, 1) -> nMark1 = aMark1 :: else fi;
          unassign = 0
       :: else
       fi
     );
     /* [cidr-release-unassign] UnassignPrivateIpAddresses */
     STEP(
       FENCE;
       CHECK(in_use_kept, (holds & unassign) == 0);
       UNASSIGN_CHECK_ALLOCATED;
       eniIps = eniIps & ~unassign; aIps = aIps & ~unassign;
       printf("  allocator %d: EC2 UnassignPrivateIpAddresses %d -> ips=%d\n", me, unassign, eniIps);
       observable()
     );
     /* [cidr-release-record] what EC2 confirmed, the tombstones, the lease given back */
     STEP(RECORD_PUT(aEni, aIps, nMark0, nMark1, false, skip, false))
  fi
}

proctype Allocator(byte me) {
  byte aIps, aMark0, aMark1, aTarget, unassign, nMark0, nMark1;
  bool aEni, mine, releasing;
end_idle:
  do
  :: !releasing -> allocateInvocation(); goto finished
#if AGENT == 20 && defined(CIDR_RELEASE)
  :: releasing -> releaseCidrsInvocation(); goto finished
#elif AGENT == 20
  :: releasing -> goto finished   /* without CIDR_RELEASE the sweep releases nothing on 1.20 nodes */
#else
  :: releasing -> releaseInvocation(); goto finished
#endif
crashed:
finished:
     /* an invocation that ends holding the lease (crashed, or its last write lost a race)
        leaves it to expire */
     atomic {
       if :: mine && rLease == me -> leaseAlive = false :: else fi;
       lapsed = lapsed & ~bit(me - 1);
       FORGET_WITHDRAWN;
       ENDS; rFresh = rFresh & ~bit(me - 1); aIps = 0; aMark0 = 0; aMark1 = 0; aTarget = 0;
       unassign = 0; nMark0 = 0; nMark1 = 0; aEni = false; mine = false;
       releasing = (me == 1 && !releasing)   /* the sweep (allocator 1) also runs the release */
     }
  od
}

/*
 * [lease-expiry] The lease of an invocation that is gone expires, some time later.
 * [lease-lapse] A lease lapses while its holder still runs (a fault): the holder knows it by its
 * own clock (lapsed) and goes on; anyone else may take the node meanwhile.
 */
proctype Clock() {
end_idle:
  do
  :: atomic { rLease != 0 && !leaseAlive && !leaseExpired -> leaseExpired = true; printf("the lease of allocator %d expires\n", rLease) }
  :: atomic {
       rLease != 0 && leaseAlive && !leaseExpired && faults < MAXFAULTS ->
       faults++; leaseExpired = true; lapsed = lapsed | bit(rLease - 1);
       printf("the lease of allocator %d LAPSES while it still runs\n", rLease)
     }
  od
}

/* releaseIpsTarget for one IP: the operator's side of release-ips. */
#define REL_TARGET(m, cur, t) \
    if \
    :: m == M_MARKED -> t = ((cur == R_READY || cur == R_DONOT) -> cur : R_MARKED) \
    :: m == M_RELEASED -> t = (cur != R_NONE -> R_RELEASED : R_NONE) \
    :: m == M_READY -> t = cur \
    :: else -> t = R_NONE \
    fi

/*
 * The sync plans from the CiliumNode it read. A guarded write only lands while the CiliumNode is
 * still that version, so the model plans from the current one while the read is fresh, and a read
 * that is no longer fresh only ever leads to a failed patch and a re-read. Only the unguarded
 * mutation needs the snapshot itself.
 */
#ifdef MUT_UNGUARDED
#define RV_MATCHES true
#define S_StEni sStEni
#define S_StIps sStIps
#define S_Pool sPool
#define S_Rel0 sRel0
#define S_Rel1 sRel1
#define S_Ann sAnn[id]
#define S_Alloc sAlloc
#define SNAPSHOT sAnn[id] = cAnn; sStEni = cStEni; sStIps = cStIps; sPool = cPool; sRel0 = cRel[0]; sRel1 = cRel[1]; sAlloc = cAlloc
#else
#define RV_MATCHES has(cFresh, id)
#define S_StEni cStEni
#define S_StIps cStIps
#define S_Pool cPool
#define S_Rel0 cRel[0]
#define S_Rel1 cRel[1]
#define S_Ann cAnn
#define S_Alloc cAlloc
#define SNAPSHOT skip
#endif

/*
 * [sync-applied-version] appliedRecordVersion: the annotation's version counts only in the table
 * the record-table annotation names; a version of another table is taken as absent, so the sync
 * claims the node afresh from its own table's record. MUT_TABLE_BLIND compares the numbers across tables, where the
 * original table's count is ahead of the new one's (restored versions, or versions started over).
 */
/*
 * [sync-reconciled-check] planSyncStep publishes a record only once the allocator has reconciled it
 * with EC2 in the sync's own table (its stamp names that table); a restored item still carries the
 * old table's stamp and waits. [sync-table-order] Table generations are ordered by creation time:
 * a sync never writes over a CiliumNode whose annotation names a newer table than its own.
 */
#if defined(RESTORE) && !defined(MUT_ADOPT_UNRECONCILED)
#define UNRECONCILED (xStamp != xTab[id])
#else
#define UNRECONCILED false
#endif
#if defined(RESTORE) && !defined(MUT_TABLES_UNORDERED)
#define SUPERSEDED (S_Ann != 0 && cTab > xTab[id])
#else
#define SUPERSEDED false
#endif
#if defined(RESTORE) && defined(MUT_TABLE_BLIND)
#define APPLIED_IS(v) (S_Ann != 0 && cTab == xTab[id] && S_Ann == (v))
#define APPLIED_ABOVE(v) (S_Ann != 0 && ((cTab == xTab[id] && S_Ann > (v)) || cTab < xTab[id]))
#elif defined(RESTORE)
#define APPLIED_IS(v) (S_Ann != 0 && cTab == xTab[id] && S_Ann == (v))
#define APPLIED_ABOVE(v) (S_Ann != 0 && cTab == xTab[id] && S_Ann > (v))
#else
#define APPLIED_IS(v) (S_Ann == (v))
#define APPLIED_ABOVE(v) (S_Ann > (v))
#endif

/*
 * planSyncStep over (the record read, the CiliumNode read) into step/t*: 0 in sync, 1 spec-claim,
 * 2 status, 3 spec, 4 stale record, 5 foreign CiliumNode, 6 record not reconciled with EC2 in the
 * sync's table, 7 the CiliumNode claimed by a newer table.
 */
inline planSync() {
  withheld = WITHHELD(xMark0, xMark1);
  wantedPool = xIps & ~withheld;
#if AGENT == 19
  if :: leaving(xMark0) -> wantedPool = wantedPool & ~bit(0) :: else fi;
  if :: leaving(xMark1) -> wantedPool = wantedPool & ~bit(1) :: else fi;
#endif
  claimed = APPLIED_IS(xVer[id]);
  tPool = 0; tStEni = false; tStIps = 0; tRel0 = 0; tRel1 = 0;
  if
  :: UNRECONCILED -> step = 6   /* [sync-reconciled-check] wait for the allocator (planSyncStep) */
  :: !UNRECONCILED && cOwner != ME -> step = 5   /* spec.instance-id never changes: read with the CiliumNode */
  :: !UNRECONCILED && cOwner == ME && SUPERSEDED -> step = 7   /* [sync-table-order] */
  :: !UNRECONCILED && cOwner == ME && !SUPERSEDED && APPLIED_ABOVE(xVer[id]) -> step = 4
  :: else ->
#if AGENT == 19
     REL_TARGET(xMark0, S_Rel0, tRel0);
     REL_TARGET(xMark1, S_Rel1, tRel1);
#endif
     if
     :: !claimed && ((S_Pool & ~wantedPool) != 0 || (S_StEni && !xEni) || (S_StIps & ~(xIps & ~withheld)) != 0) ->
        step = 1; tPool = S_Pool & wantedPool
     :: else ->
        if
        :: claimed && xEni -> tStEni = true; tStIps = (xIps & ~withheld) | (S_Pool & S_StIps)
        :: claimed && !xEni && S_StEni && (S_Pool & S_StIps) != 0 -> tStEni = true; tStIps = S_StIps
        :: claimed && !xEni && !(S_StEni && (S_Pool & S_StIps) != 0) -> tStEni = false; tStIps = 0
        :: !claimed -> tStEni = S_StEni || xEni; tStIps = S_StIps | (xIps & ~withheld)
        fi;
#ifdef MUT_SPEC_FIRST
        tPool = wantedPool;
        if
        :: !claimed || tPool != S_Pool -> step = 3
        :: else -> step = ((tStEni != S_StEni || tStIps != S_StIps || tRel0 != S_Rel0 || tRel1 != S_Rel1) -> 2 : 0)
        fi
#else
        if
        :: tStEni != S_StEni || tStIps != S_StIps || tRel0 != S_Rel0 || tRel1 != S_Rel1 -> step = 2
        :: else ->
           tPool = wantedPool & (S_StEni -> S_StIps : 0);
           step = ((!claimed || tPool != S_Pool) -> 3 : 0)
        fi
#endif
     fi
  fi
}

#ifdef MUT_TWO_PLACE
/* the pool from a second place, read when writing, not from the version planned */
#define TWO_PLACE_POOL \
    tPool = rIps; \
    if :: leaving(rMark[0]) -> tPool = tPool & ~bit(0) :: else fi; \
    if :: leaving(rMark[1]) -> tPool = tPool & ~bit(1) :: else fi
#else
#define TWO_PLACE_POOL skip
#endif

/*
 * never_backwards, checked at every sync write: no sync write carries an older record version than
 * one already written FROM THE SAME TABLE. Versions of two tables have no order (a new table starts
 * over, a restored one goes back to the restore point): across the switch the property is that the
 * sync adopts the new table's records (claims the node afresh, which the liveness check `served`
 * requires), while each table's own versions never go backwards.
 */
#ifdef RESTORE
#define PUBLISH_VERSION \
    if \
    :: xTab[id] -> CHECK(never_backwards, xVer[id] >= pubVerNew); pubVerNew = xVer[id] \
    :: else -> CHECK(never_backwards, xVer[id] >= pubVer); pubVer = xVer[id] \
    fi
/* [sync-table] the end of an invocation: the next one reads the table deployed then (TABLE_NAME);
   table 0's item is forgotten once no sync can read it any more */
#define SYNC_ENDS \
    xTab[id] = rTab; \
    if \
    :: rTab && xTab[0] && xTab[1] -> oVer = 0; oEni = false; oStamp = false; oIps = 0; oMark0 = 0; oMark1 = 0; realOld = 0 \
    :: else \
    fi
#else
#define PUBLISH_VERSION CHECK(never_backwards, xVer[id] >= pubVer); pubVer = xVer[id]
#define SYNC_ENDS skip
#endif

#ifdef RESTORE
#define RESTORE_PRINT_TABLE if :: cAnn != 0 -> printf("    (ann counts in table %d)\n", cTab) :: else fi
#else
#define RESTORE_PRINT_TABLE skip
#endif

/*
 * One sync invocation at a time per process (sync-node syncNode with planSyncStep). The stream's
 * at-least-once, reordered delivery and the schedule only decide WHEN one runs, since it reads the
 * item itself: a sync may start at any moment.
 */
proctype Sync(byte id) {
  byte sStIps, sPool, sRel0, sRel1, sAlloc;
  bool sStEni;
  byte xIps, xMark0, xMark1;
  bool xEni, xStamp, done;
end_idle:
  do
  :: rVer > 0 ->   /* [sync-initial-read] syncNode: no record, nothing to publish */
     do
     :: done -> break
     :: else ->
        /* [sync-read-ciliumnode] the CiliumNode FIRST */
        READ(
          cFresh = cFresh | bit(id); SNAPSHOT; renumber();
          printf("sync %d reads CiliumNode: ann=v%d status eni=%d ips=%d pool=%d release-ips=%d,%d\n", id, realAnn, cStEni, cStIps, cPool, cRel[0], cRel[1]);
          RESTORE_PRINT_TABLE
        );
        /* [sync-read-record] then the record, strongly consistent */
        READ(
          if
          :: xTab[id] == rTab -> xVer[id] = rVer; xEni = rEni; xIps = rIps; xMark0 = rMark[0]; xMark1 = rMark[1];
             xStamp = rStamp;
             realRead[id] = realVer
          :: else -> xVer[id] = oVer; xEni = oEni; xIps = oIps; xMark0 = oMark0; xMark1 = oMark1;
             xStamp = oStamp;
             realRead[id] = realOld   /* a sync of the deployment before the switch */
          fi;
          renumber();
          printf("  sync %d reads record v%d of table %d: eni=%d ips=%d marks=%d,%d stamp=table %d\n", id, realRead[id], xTab[id], xEni, xIps, xMark0, xMark1, xStamp);
          if :: xVer[id] == 0 -> goto no_record :: else fi   /* a new, empty table: nothing to publish */
        );
        do
        :: STEP(
             /* [sync-plan] planSyncStep, then [sync-write] its one JSON Patch, which starts with
                the resourceVersion test */
             if
             :: RV_MATCHES ->
                planSync();
                if
                :: step == 0 || step >= 4 -> done = true   /* in sync, stale, refused, waiting, superseded */
                :: else
                fi
             :: else
             fi;
             if
             :: done -> skip
             :: !done && RV_MATCHES ->
                CHECK(right_node_only, cOwner == ME);
                PUBLISH_VERSION;
                if
                :: step == 1 -> cPool = tPool; cAnn = xVer[id]; cTab = xTab[id]   /* [sync-spec-claim] */
                :: step == 2 -> cStEni = tStEni; cStIps = tStIps;   /* [sync-status] */
                   cRel[0] = tRel0; cRel[1] = tRel1
                :: step == 3 ->                                      /* [sync-spec] */
                   TWO_PLACE_POOL;
                   cPool = tPool; cAnn = xVer[id]; cTab = xTab[id]
                fi;
                if :: step != 2 -> realAnn = realRead[id] :: else fi;
                printf("  sync %d writes %e from v%d: ann=v%d status eni=%d ips=%d pool=%d release-ips=%d,%d\n", id, (step == 1 -> spec_claim : (step == 2 -> status : spec)), realRead[id], realAnn, cStEni, cStIps, cPool, cRel[0], cRel[1]);
                observable();
                /* the write's response is the next CiliumNode read */
                cFresh = bit(id); SNAPSHOT; renumber()
             :: !done && !RV_MATCHES -> cFresh = cFresh & ~bit(id);   /* lost a race: re-read */
                printf("  sync %d: patch fails its resourceVersion test\n", id)
             fi;
             step = 0; wantedPool = 0; tPool = 0; tStEni = false; tStIps = 0; tRel0 = 0; tRel1 = 0;
             claimed = false
           );
           if :: done || !has(cFresh, id) -> break :: else fi
        od
     od;
crashed:
no_record:
     atomic {
       cFresh = cFresh & ~bit(id); sAnn[id] = 0; sStEni = false; sStIps = 0; sPool = 0;
       sRel0 = 0; sRel1 = 0; sAlloc = 0; xVer[id] = 0; xEni = false; xIps = 0; xMark0 = 0; xMark1 = 0; xStamp = false;
       done = false;
       SYNC_ENDS;
       renumber()
     }
  od
}

#ifdef RESTORE
/*
 * [table-restore] The node table replaced, once: the stack is deployed against a new table
 * (infra/README.md, "Restore the node table"), whose item versions start over. RESTORE=1: a new, empty
 * table (the allocator records the node afresh from EC2); RESTORE=2: a point-in-time restore,
 * holding the item as it was at [restore-point], any earlier moment. The CiliumNode keeps what the
 * old table's versions put there, annotated with the old table's name.
 * The restored item keeps its stamp (rStamp: the old table), so no sync publishes it before an
 * allocator has reconciled it with EC2 in the new table ([sync-reconciled-check]); table 1 is
 * created after table 0, so a sync of table 0 never writes over table 1's claim ([sync-table-order]).
 * Assumptions: the switch lands while no allocate or sweep invocation of the old deployment runs (a
 * lease counts only in its own table; their overlap is not modelled) and, unless OLD_SYNCS, while
 * no sync of the old deployment has read its table; with OLD_SYNCS such syncs go on with the old
 * table, as the switch left it, next to the new deployment's. A restored lease has expired (a
 * restore takes longer than a lease lasts).
 */
#ifdef OLD_SYNCS
#define SWITCH_WAITS_FOR_SYNCS true
#else
#define SWITCH_WAITS_FOR_SYNCS (xVer[0] == 0 && xVer[1] == 0)
#endif
proctype Restore() {
#if RESTORE == 2
  /* [restore-point] the moment restored to */
  READ(bkAt = (rVer > 0); bkEni = rEni; bkStamp = rStamp; bkIps = rIps; bkMark0 = rMark[0]; bkMark1 = rMark[1]; realBk = realVer;
       printf("restore point: record v%d (eni=%d ips=%d marks=%d,%d)\n", realVer, rEni, rIps, rMark[0], rMark[1]));
#endif
  atomic {
    busy == 0 && SWITCH_WAITS_FOR_SYNCS ->
    if
    :: xVer[0] != 0 || xVer[1] != 0 ->   /* a sync of the old deployment is still running */
       oVer = rVer; oEni = rEni; oStamp = rStamp; oIps = rIps; oMark0 = rMark[0]; oMark1 = rMark[1]; realOld = realVer
    :: else
    fi;
    xTab[0] = (xVer[0] == 0); xTab[1] = (xVer[1] == 0);   /* those yet to read go to the new table */
    /* a restored item keeps the stamp it had: the old table's */
    rTab = 1; rVer = (bkAt -> 1 : 0); rEni = bkEni; rStamp = bkStamp; rIps = bkIps; rMark[0] = bkMark0; rMark[1] = bkMark1;
    rLease = 0; leaseAlive = false; leaseExpired = false; rFresh = 0;
    realVer = (bkAt -> realBk : 0);
    bkAt = false; bkEni = false; bkStamp = false; bkIps = 0; bkMark0 = 0; bkMark1 = 0; realBk = 0;
    renumber();
    printf("THE TABLE IS REPLACED: the functions now use table 1, holding record v%d (eni=%d ips=%d marks=%d,%d)\n", realVer, rEni, rIps, rMark[0], rMark[1])
  }
}
#endif

/*
 * OPEN HAZARD of the code as it is (RESTORE with OLD_SYNCS): an agent restart removes every
 * annotation of ours, the record-table annotation with the rest, so a sync of the deployment
 * before the switch, still running with the old table, can no longer tell that a newer table has
 * claimed the CiliumNode ([sync-table-order] reads that annotation): it claims the node with the
 * old table's record and drops from spec.ipam.pool an address the new deployment assigned since,
 * which a pod may hold (in_use_kept; `npm run verify` prints the counterexample as the open hazard
 * old-sync-after-agent-restart). NO_RESTART_BESIDE_OLD_SYNCS is the assumption under which the
 * configuration table-replaced-old-syncs checks everything else: no agent restarts while a sync of
 * the old deployment still runs (at most the sync function's timeout after the switch).
 */
#if defined(RESTORE) && defined(OLD_SYNCS) && defined(NO_RESTART_BESIDE_OLD_SYNCS)
#define RESTART_ALLOWED (!rTab || (xTab[0] && (SYNCS < 2 || xTab[1])))
#else
#define RESTART_ALLOWED true
#endif

/* The 1.19 agent's answer to one release-ips entry (cilium agent, crd.go). */
#define ANSWER(i) \
    if \
    :: cRel[i] == R_MARKED && has(cPool, i) && !has(holds, i) -> cRel[i] = R_READY \
    :: cRel[i] == R_MARKED && !(has(cPool, i) && !has(holds, i)) -> cRel[i] = R_DONOT \
    :: cRel[i] == R_RELEASED && !has(cPool, i) -> cRel[i] = R_NONE \
    :: else \
    fi

#if AGENT == 19
/* A 1.12-1.19 agent: allocates from spec.ipam.pool, reports status.ipam.used, answers release-ips. */
#define FREE19(i) (podOps < PODOPS && has(cPool, i) && !has(holds, i) && cRel[i] != R_READY && cRel[i] != R_RELEASED)
proctype Agent() {
end_idle:
  do
  :: atomic {
       /* [agent19-allocate] a pod gets a pool IP, whose ENI the agent looks up in status */
       FREE19(0) -> CHECK(status_covers_spec, cStEni && has(cStIps, 0)); holds = holds | bit(0); podOps++;
       printf("agent: a pod gets ip0\n")
     }
  :: atomic {
       FREE19(1) -> CHECK(status_covers_spec, cStEni && has(cStIps, 1)); holds = holds | bit(1); podOps++;
       printf("agent: a pod gets ip1\n")
     }
  :: atomic {
       /* [agent19-free] a pod goes away */
       podOps < PODOPS && holds != 0 ->
       if :: has(holds, 0) -> holds = holds & ~bit(0) :: has(holds, 1) -> holds = holds & ~bit(1) fi;
       podOps++;
       printf("agent: a pod goes away; in use %d\n", holds)
     }
  :: atomic {
       /* [agent19-update-status] status.ipam.used and the handshake answers, on the version read */
       (cUsed != holds || cRel[0] == R_MARKED || cRel[1] == R_MARKED
         || (cRel[0] == R_RELEASED && !has(cPool, 0)) || (cRel[1] == R_RELEASED && !has(cPool, 1))) ->
       cUsed = holds;
       ANSWER(0); ANSWER(1);
       cFresh = 0;
       printf("agent updates status: used=%d release-ips=%d,%d\n", cUsed, cRel[0], cRel[1]);
       observable()
     }
  :: atomic {
       /* [agent-restart] the agent sets the CiliumNode's annotations to the Node's: ours is gone */
       faults < MAXFAULTS && cAnn != 0 && RESTART_ALLOWED -> faults++; cAnn = 0; cTab = 0; realAnn = 0; cFresh = 0; renumber();
       printf("agent restarts: the record-version annotation is gone\n"); observable()
     }
  od
}
#else
/*
 * A 1.20 multi-pool agent: derives /32 CIDRs from status.eni.enis, hands them to pods, writes
 * spec.ipam.pools (requested = in use + pre-allocate, allocated = the CIDRs it holds), releases
 * by dropping CIDRs from allocated.
 */
#define WANT (count(holds) + PRE)
proctype Agent() {
end_idle:
  do
  :: atomic {
       /* [agent20-allocate] a pod gets an address of an allocated CIDR */
       podOps < PODOPS && (cAlloc & ~holds) != 0 ->
       if
       :: has(cAlloc, 0) && !has(holds, 0) -> holds = holds | bit(0)
       :: has(cAlloc, 1) && !has(holds, 1) -> holds = holds | bit(1)
       fi;
       podOps++;
       printf("agent: a pod gets an address; in use %d\n", holds)
     }
  :: atomic {
       /* [agent20-free] */
       podOps < PODOPS && holds != 0 ->
       if :: has(holds, 0) -> holds = holds & ~bit(0) :: has(holds, 1) -> holds = holds & ~bit(1) fi;
       podOps++;
       printf("agent: a pod goes away; in use %d\n", holds)
     }
  :: atomic {
       /* [agent20-update-spec] spec.ipam.pools: requested, and allocated grown from status or
          shrunk (the release), on the version read */
       (cReq != WANT
         || (count(cAlloc) < WANT && cStEni && (cStIps & ~cAlloc) != 0)
         || (count(cAlloc) > WANT && (cAlloc & ~holds) != 0)) ->
       cReq = WANT;
       if
       :: count(cAlloc) < WANT && cStEni && has(cStIps & ~cAlloc, 0) -> cAlloc = cAlloc | bit(0)
       :: count(cAlloc) < WANT && cStEni && has(cStIps & ~cAlloc, 1) -> cAlloc = cAlloc | bit(1)
       :: count(cAlloc) > WANT && has(cAlloc & ~holds, 1) -> cAlloc = cAlloc & ~bit(1)
       :: count(cAlloc) > WANT && has(cAlloc & ~holds, 0) -> cAlloc = cAlloc & ~bit(0)
       :: else
       fi;
       cFresh = 0;
       printf("agent updates spec.ipam.pools: requested=%d allocated=%d\n", cReq, cAlloc);
       observable()
     }
  :: atomic {
       /* [agent-restart] */
       faults < MAXFAULTS && cAnn != 0 && RESTART_ALLOWED -> faults++; cAnn = 0; cTab = 0; realAnn = 0; cFresh = 0; renumber();
       printf("agent restarts: the record-version annotation is gone\n"); observable()
     }
  od
}
#endif

/*
 * Liveness: every node with demand is eventually served for good, <>[] SERVED: its pool (1.19) or
 * its status (1.20) holds the IPs the demand asks for, up to the slots there are, and (1.19) the
 * agent has reported what it uses. Every run eventually has no more faults, pod starts or stops, or
 * table replacement (each is bounded), so this is "served once the faults and the demand stop".
 * Fairness (pan -a -f): weak fairness between processes, i.e. an actor that could take a step
 * forever eventually takes one: an allocate invocation or the sweep eventually starts, a sync
 * eventually runs, the agent eventually reports, a dead holder's lease eventually expires. Nothing
 * stronger is assumed: no strong fairness, and none between the choices inside one actor.
 */
#define AT_LEAST_OR_FULL(n, x) ((n) >= (x) || (n) >= NI)
#if AGENT == 19
#define SERVED (cUsed == holds && AT_LEAST_OR_FULL(count(cPool), count(cUsed) + PRE))
#else
#define SERVED (cReq == WANT && cStEni && AT_LEAST_OR_FULL(count(cStIps), cReq))
#endif
#ifdef LIVENESS
ltl served { <>[] SERVED }
#endif

init {
  atomic {
#ifdef FOREIGN
    cOwner = OTHER;
#endif
    run Allocator(1);
#if ALLOCATORS > 1
    run Allocator(2);
#endif
    run Sync(0);
#if SYNCS > 1
    run Sync(1);
#endif
    run Agent();
#ifdef RESTORE
    run Restore();
#endif
    run Clock()
  }
}
