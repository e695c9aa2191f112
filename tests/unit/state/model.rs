//! The session protocol of `src/state` and the call wrapper (`src/call`), as a model that
//! stateright explores exhaustively: every interleaving of four calls in three processes (one
//! per network mode; two calls share the first process), every crash of a process at any step,
//! with each process's level cache and each process's kept pass.
//!
//! # What is modelled (and where it lives in the code)
//!
//! - The store: the session's committed level `L`, its change counter `C` (the lock file's
//!   counter), and the session's lock: shared holders or one exclusive holder
//!   (`state::sqlite::slots`, `state::postgres` advisory locks).
//! - Each process's cache of `(counter, level)` (`SqliteStore::cache`): used only when the
//!   counter read under the lock equals the cached one.
//! - A call (`call::Runtime::call_def`): `enter` (shared, read the level) → admit → if the tool
//!   raises the session: leave, `enter_exclusive`, read again, re-admit, bump the counter,
//!   commit, keep the pass → run the handler → leave.
//! - Kept passes (`state::keep`): a process keeps the shared lock its call took, with the level
//!   read under it, after the call ends; later calls of that process *join* it (no lock, no read).
//!   The process drains it at any moment (idle, an escalation waits anywhere, its own call wants
//!   to escalate: modelled as one nondeterministic `Drain`): no call joins a draining pass, and
//!   its lock goes when the last call joined to it leaves.
//! - A crash: the process's calls vanish, its locks go (the kernel releases open-file-description
//!   locks; PostgreSQL ends a dead connection's advisory locks), its cache is gone; a bump
//!   without its commit stays.
//! - A rolled-back store (an older copy of the database put back): the level and counter return
//!   to their first values. The lock file's generation high-water mark is ahead of the
//!   database's, so every read under the lock fails closed (`StateErrorKind::Corrupt`, the call
//!   refused) from then on.
//!
//! Several processes of one server, replicas on PostgreSQL and the servers of one trust domain
//! are the same thing here: processes sharing one session's store, each with its own mode.
//!
//! # The invariant (the checker's property)
//!
//! No handler runs on a level below the highest level ever committed for the session (`A`, which
//! a rollback cannot lower), and none runs where its instance may not serve that level or, for a
//! `connect` tool, once it is private:
//! `running ⇒ admitted ≥ A ∧ mode serves A ∧ ¬(connect ∧ A private)`.
//!
//! # Mutants (each must produce a counterexample: the model bites)
//!
//! - `StaleCache`: the cache is trusted without comparing the counter (the red-team's stale
//!   cache bug).
//! - `NoReadmission`: the exclusive pass reuses the level read under the shared one instead of
//!   reading again (the red-team's missing re-admission).
//! - `CommitBeforeBump`: commit, then bump: a crash between leaves a cache that looks current.
//! - `NoRollbackCheck`: a rolled-back database is read as if it were current.
//! - `NoSharedPass`: a call that does not raise the level reads it without holding the lock
//!   (an "in-process fast path"): an escalation elsewhere no longer waits for its handler. This
//!   is why every call holds a shared pass (its own, or its process's kept one).
//! - `ReleaseKeptWhileJoined`: a kept pass's lock goes when it drains, while calls joined to it
//!   still run.
//! - `JoinReleasedKeep`: the kept level outlives the kept lock: a call joins a pass whose lock
//!   is gone.

use bulkhead::policy::{NetworkMode, Permission, Sensitivity};
use stateright::{Checker, Model, Property};

/// A protocol variant: the real one, or a mutant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Correct,
    StaleCache,
    NoReadmission,
    CommitBeforeBump,
    NoRollbackCheck,
    NoSharedPass,
    ReleaseKeptWhileJoined,
    JoinReleasedKeep,
}

/// A tool as the wrapper sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tool {
    permission: Permission,
    sensitivity: Sensitivity,
}

const TOOLS: [Tool; 4] = [
    Tool {
        permission: Permission::Connect,
        sensitivity: Sensitivity::Public,
    },
    Tool {
        permission: Permission::Read,
        sensitivity: Sensitivity::Internal,
    },
    Tool {
        permission: Permission::Read,
        sensitivity: Sensitivity::Confidential,
    },
    Tool {
        permission: Permission::Read,
        sensitivity: Sensitivity::Secret,
    },
];

/// Where a call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    /// Not started.
    Start,
    /// Holds the shared lock and read `level`.
    Shared { level: Sensitivity },
    /// Gave the shared pass back to escalate; `seen` is what it read under it.
    WantExclusive { seen: Sensitivity },
    /// Holds the lock exclusively and decided on `level`.
    Exclusive { level: Sensitivity },
    /// Bumped the counter (Correct) or committed (CommitBeforeBump), under the exclusive lock.
    Half { level: Sensitivity },
    /// Running its handler under a shared pass, admitted at `level`.
    Running { level: Sensitivity },
    /// Finished, refused, or lost in a crash.
    Done,
}

/// One call: the process it runs in and its tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Call {
    process: usize,
    tool: Tool,
    step: Step,
    /// Holds no lock of its own: joined to its process's kept pass.
    joined: bool,
}

/// A process's kept pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kept {
    None,
    /// Holds the session's lock shared; `level` was read under it.
    Held {
        level: Sensitivity,
        draining: bool,
    },
    /// Its lock is gone (only `JoinReleasedKeep` still joins it).
    Released {
        level: Sensitivity,
    },
}

/// A kept pass's holder id in `State::shared` (call indices are below it).
const KEEP: usize = 100;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    level: Sensitivity,
    /// The highest level ever committed (what was acknowledged to some caller).
    acked: Sensitivity,
    /// The database was replaced by an older copy (the lock file remembers).
    rolled_back: bool,
    counter: u8,
    /// Shared holders, by call index.
    shared: Vec<usize>,
    exclusive: Option<usize>,
    /// Per process: `(counter, level)` cached.
    cache: Vec<Option<(u8, Sensitivity)>>,
    /// Per process: its kept pass.
    kept: Vec<Kept>,
    calls: Vec<Call>,
    crashes: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// Call `i` takes its next step.
    Step(usize),
    /// Process `p` dies (and restarts with nothing).
    Crash(usize),
    /// Process `p` drains its kept pass.
    Drain(usize),
    /// An older copy of the database is put back.
    Rollback,
}

struct Protocol {
    variant: Variant,
    /// Each process's instance: one per mode.
    modes: [NetworkMode; 3],
    max_crashes: u8,
    /// Whether the store may be rolled back (once).
    rollbacks: bool,
    /// Whether processes keep passes.
    keeps: bool,
}

impl Protocol {
    fn new(variant: Variant) -> Protocol {
        Protocol {
            variant,
            modes: NetworkMode::ALL,
            max_crashes: 1,
            rollbacks: true,
            keeps: true,
        }
    }

    /// The wrapper's admission rule (`call::admit`): the instance serves the needed level, and
    /// a connect tool is refused once the session is private.
    fn admits(&self, c: &Call, level: Sensitivity) -> bool {
        let needed = level.max(c.tool.sensitivity);
        self.modes[c.process].serves(needed)
            && !(c.tool.permission == Permission::Connect && level.is_private())
    }

    /// The level read under a held lock, through the process's cache; `None`: the read fails
    /// closed (the store was rolled back) and the call is refused.
    fn read(&self, s: &mut State, process: usize) -> Option<Sensitivity> {
        if s.rolled_back && self.variant != Variant::NoRollbackCheck {
            return None;
        }
        Some(match s.cache[process] {
            Some((_, level)) if self.variant == Variant::StaleCache => level,
            Some((counter, level)) if counter == s.counter => level,
            _ => {
                s.cache[process] = Some((s.counter, s.level));
                s.level
            }
        })
    }

    /// Call `i` gives its pass back: its own lock, or its place in the kept pass (whose lock
    /// goes with the last joined call once it drains).
    fn release(&self, s: &mut State, i: usize) {
        if std::mem::take(&mut s.calls[i].joined) {
            let p = s.calls[i].process;
            if let Kept::Held {
                level,
                draining: true,
            } = s.kept[p]
                && !Self::joined_running(s, p, i)
            {
                self.release_keep(s, p, level);
            }
            return;
        }
        s.shared.retain(|&h| h != i);
        if s.exclusive == Some(i) {
            s.exclusive = None;
        }
    }

    /// Whether a call of process `p` other than `except` is joined to its kept pass.
    fn joined_running(s: &State, p: usize, except: usize) -> bool {
        s.calls
            .iter()
            .enumerate()
            .any(|(j, c)| j != except && c.process == p && c.joined)
    }

    fn release_keep(&self, s: &mut State, p: usize, level: Sensitivity) {
        s.shared.retain(|&h| h != KEEP + p);
        s.kept[p] = if self.variant == Variant::JoinReleasedKeep {
            Kept::Released { level }
        } else {
            Kept::None
        };
    }

    /// The level a new call of process `p` may join at, without a lock or a read.
    fn joinable(&self, s: &State, p: usize) -> Option<Sensitivity> {
        match s.kept[p] {
            Kept::Held {
                level,
                draining: false,
            } => Some(level),
            Kept::Released { level } if self.variant == Variant::JoinReleasedKeep => Some(level),
            _ => None,
        }
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut out = Vec::new();
        for a in TOOLS {
            for b in TOOLS {
                for (c, d) in TOOLS.into_iter().flat_map(|c| TOOLS.map(|d| (c, d))) {
                    out.push(State {
                        level: Sensitivity::Public,
                        acked: Sensitivity::Public,
                        rolled_back: false,
                        counter: 0,
                        shared: Vec::new(),
                        exclusive: None,
                        cache: vec![None; 3],
                        kept: vec![Kept::None; 3],
                        calls: [(0, a), (0, b), (1, c), (2, d)]
                            .into_iter()
                            .map(|(process, tool)| Call {
                                process,
                                tool,
                                step: Step::Start,
                                joined: false,
                            })
                            .collect(),
                        crashes: 0,
                    });
                }
            }
        }
        out
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for (i, c) in s.calls.iter().enumerate() {
            let ready = match c.step {
                Step::Start => s.exclusive.is_none() || self.joinable(s, c.process).is_some(),
                Step::WantExclusive { .. } => s.exclusive.is_none() && s.shared.is_empty(),
                Step::Done => false,
                _ => true,
            };
            if ready {
                actions.push(Action::Step(i));
            }
        }
        if self.rollbacks && !s.rolled_back && s.level > Sensitivity::Public {
            actions.push(Action::Rollback);
        }
        for (p, k) in s.kept.iter().enumerate() {
            if matches!(
                k,
                Kept::Held {
                    draining: false,
                    ..
                }
            ) {
                actions.push(Action::Drain(p));
            }
        }
        if s.crashes < self.max_crashes {
            for p in 0..3 {
                if s.calls
                    .iter()
                    .any(|c| c.process == p && c.step != Step::Done)
                {
                    actions.push(Action::Crash(p));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Rollback => {
                s.level = Sensitivity::Public;
                s.counter = 0;
                s.rolled_back = true;
            }
            Action::Crash(p) => {
                for (i, c) in s.calls.iter_mut().enumerate() {
                    if c.process == p && c.step != Step::Done {
                        c.step = Step::Done;
                        c.joined = false;
                        s.shared.retain(|&h| h != i);
                        if s.exclusive == Some(i) {
                            s.exclusive = None;
                        }
                    }
                }
                s.shared.retain(|&h| h != KEEP + p);
                s.kept[p] = Kept::None;
                s.cache[p] = None;
                s.crashes += 1;
            }
            Action::Drain(p) => {
                let Kept::Held { level, .. } = s.kept[p] else {
                    return None;
                };
                s.kept[p] = Kept::Held {
                    level,
                    draining: true,
                };
                if self.variant == Variant::ReleaseKeptWhileJoined
                    || !Self::joined_running(&s, p, usize::MAX)
                {
                    self.release_keep(&mut s, p, level);
                }
            }
            Action::Step(i) => {
                let c = s.calls[i];
                let next = match c.step {
                    Step::Start => {
                        if let Some(level) = self.joinable(&s, c.process) {
                            s.calls[i].joined = true;
                            s.calls[i].step = Step::Shared { level };
                            return Some(s);
                        }
                        if self.variant != Variant::NoSharedPass
                            || c.tool.sensitivity > Sensitivity::Public
                        {
                            s.shared.push(i);
                        }
                        match self.read(&mut s, c.process) {
                            Some(level) => {
                                // The first call of a process without a kept pass keeps its own.
                                if self.keeps
                                    && s.kept[c.process] == Kept::None
                                    && s.shared.contains(&i)
                                {
                                    s.shared.retain(|&h| h != i);
                                    s.shared.push(KEEP + c.process);
                                    s.kept[c.process] = Kept::Held {
                                        level,
                                        draining: false,
                                    };
                                    s.calls[i].joined = true;
                                }
                                Step::Shared { level }
                            }
                            None => {
                                self.release(&mut s, i);
                                Step::Done
                            }
                        }
                    }
                    Step::Shared { level } => {
                        if !self.admits(&c, level) {
                            self.release(&mut s, i);
                            Step::Done
                        } else if c.tool.sensitivity > level {
                            // `enter_exclusive` drains the process's kept pass first.
                            if c.joined
                                && let Kept::Held { level, .. } = s.kept[c.process]
                            {
                                s.kept[c.process] = Kept::Held {
                                    level,
                                    draining: true,
                                };
                            }
                            self.release(&mut s, i);
                            Step::WantExclusive { seen: level }
                        } else {
                            Step::Running { level }
                        }
                    }
                    Step::WantExclusive { seen } => {
                        s.exclusive = Some(i);
                        let now = if self.variant == Variant::NoReadmission {
                            Some(seen)
                        } else {
                            self.read(&mut s, c.process)
                        };
                        let target = now.map(|n| n.max(c.tool.sensitivity));
                        if let Some(target) = target.filter(|t| self.admits(&c, *t)) {
                            Step::Exclusive { level: target }
                        } else {
                            self.release(&mut s, i);
                            Step::Done
                        }
                    }
                    Step::Exclusive { level } => {
                        if self.variant == Variant::CommitBeforeBump {
                            s.level = s.level.max(level);
                            s.acked = s.acked.max(s.level);
                        } else {
                            s.counter += 1;
                        }
                        Step::Half { level }
                    }
                    Step::Half { level } => {
                        if self.variant == Variant::CommitBeforeBump {
                            s.counter += 1;
                        } else {
                            s.level = s.level.max(level);
                            s.acked = s.acked.max(s.level);
                        }
                        let committed = s.level;
                        s.cache[c.process] = Some((s.counter, committed));
                        // Downgrade to shared and run (the escalation's own handler).
                        s.exclusive = None;
                        s.shared.push(i);
                        Step::Running { level: committed }
                    }
                    Step::Running { .. } => {
                        self.release(&mut s, i);
                        Step::Done
                    }
                    Step::Done => return None,
                };
                s.calls[i].step = next;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "no handler runs below or outside the committed level",
                |m: &Protocol, s: &State| {
                    s.calls.iter().all(|c| match c.step {
                        Step::Running { level } => {
                            level >= s.acked
                                && m.modes[c.process].serves(s.acked.max(c.tool.sensitivity))
                                && !(c.tool.permission == Permission::Connect
                                    && s.acked.is_private())
                        }
                        _ => true,
                    })
                },
            ),
            // The model is not vacuous: escalations commit, and a connect call runs.
            Property::sometimes("a session reaches secret", |_: &Protocol, s: &State| {
                s.level == Sensitivity::Secret
            }),
            Property::sometimes("a connect handler runs", |_: &Protocol, s: &State| {
                s.calls.iter().any(|c| {
                    c.tool.permission == Permission::Connect
                        && matches!(c.step, Step::Running { .. })
                })
            }),
            Property::sometimes(
                "a handler joined to a kept pass runs",
                |_: &Protocol, s: &State| {
                    s.calls
                        .iter()
                        .any(|c| c.joined && matches!(c.step, Step::Running { .. }))
                },
            ),
        ]
    }
}

fn check(variant: Variant) -> Option<String> {
    check_model(Protocol::new(variant))
}

fn check_model(model: Protocol) -> Option<String> {
    let (variant, keeps) = (model.variant, model.keeps);
    let checker = model.checker().spawn_bfs().join();
    let mut examples = vec!["a session reaches secret", "a connect handler runs"];
    if keeps {
        examples.push("a handler joined to a kept pass runs");
    }
    for e in examples {
        assert!(
            checker.discovery(e).is_some(),
            "{variant:?}: never `{e}`: the model is vacuous"
        );
    }
    eprintln!(
        "{variant:?}: {} states explored ({} unique)",
        checker.state_count(),
        checker.unique_state_count()
    );
    checker
        .discovery("no handler runs below or outside the committed level")
        .map(|path| format!("{:#?}", path.into_actions()))
}

#[test]
fn the_session_protocol_keeps_its_invariant_in_every_interleaving_and_crash() {
    assert_eq!(check(Variant::Correct), None);
}

#[test]
fn the_model_finds_the_stale_cache_bug() {
    let trace = check(Variant::StaleCache).expect("a counterexample");
    eprintln!("stale cache:\n{trace}");
}

#[test]
fn the_model_finds_the_missing_readmission_bug() {
    let trace = check(Variant::NoReadmission).expect("a counterexample");
    eprintln!("no re-admission:\n{trace}");
}

#[test]
fn the_model_finds_a_call_that_runs_without_a_shared_pass() {
    let trace = check(Variant::NoSharedPass).expect("a counterexample");
    eprintln!("no shared pass:\n{trace}");
}

#[test]
fn the_model_finds_a_kept_pass_released_while_calls_joined_to_it_run() {
    let trace = check(Variant::ReleaseKeptWhileJoined).expect("a counterexample");
    assert!(trace.contains("Drain"), "{trace}");
    eprintln!("kept pass released while joined:\n{trace}");
}

#[test]
fn the_model_finds_a_call_joining_a_kept_pass_whose_lock_is_gone() {
    // Typically: the process's own escalation drains the kept pass, and its other call then
    // joins the level from before the escalation.
    let trace = check(Variant::JoinReleasedKeep).expect("a counterexample");
    eprintln!("join a released keep:\n{trace}");
}

#[test]
fn the_model_finds_a_rolled_back_store_read_as_current() {
    let trace = check(Variant::NoRollbackCheck).expect("a counterexample");
    eprintln!("no rollback check:\n{trace}");
}

#[test]
fn the_model_finds_a_commit_before_the_counter_bump_with_a_crash_between() {
    // Crashes only (no rollback): the crash between commit and bump is what it finds.
    let model = Protocol {
        rollbacks: false,
        ..Protocol::new(Variant::CommitBeforeBump)
    };
    let trace = check_model(model).expect("a counterexample");
    assert!(trace.contains("Crash"), "{trace}");
    eprintln!("commit before bump:\n{trace}");
}
