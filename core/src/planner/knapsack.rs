//! The 0/1 knapsack under precedence constraints that the planner reduces to, and its solvers.
//!
//! Items carry a value (≥ 0, finite), a cost (≥ 1 token) and at most one parent: an item may be
//! selected only together with its parent, and so with its whole chain of ancestors. The caller
//! guarantees that parents form a forest (no cycles) and that every item fits the capacity together
//! with its ancestors.
//!
//! [`solve`] runs, in order:
//!
//! 1. the trivial case: everything fits, take everything;
//! 2. without precedence, a *core*: the best items by density are selected (`select_nth`, not a
//!    full sort) until they overflow the capacity, which locates the critical item and gives the
//!    Dantzig bound `U` and the critical density `r`; every other item `j` is fixed out when
//!    `U + v_j − r·w_j` (the LP bound with `x_j = 1`, by LP duality) cannot beat the incumbent;
//! 3. an incumbent: the better of the density greedy (over the sorted core) and the best single
//!    item (with precedence: the best single chain), which is the ½-approximation;
//! 4. depth-first branch and bound over the core in density order, include-branch first, pruned by
//!    the fractional bound of the undecided items. Without precedence this is the Horowitz–Sahni
//!    scheme ([`search_free`]): a forward move takes every following item that fits (they do not
//!    change the bound, so they need no node of their own), the bound comes from running sums by
//!    binary search, and backtracking drops the last item taken. With precedence ([`Search`]),
//!    it is enforced when branching: including an item includes its undecided ancestors
//!    (infeasible if one is excluded); an item whose ancestor is excluded can never be included.
//!    The bound ignores precedence, which only makes it weaker, never wrong.
//!
//! If the core is larger than the exact limit or the search visits more nodes than its budget, the
//! incumbent is returned (the best plan the search found, never worse than step 3).

use std::cmp::Ordering;

use super::PlanMethod;

/// No parent.
pub(crate) const NONE: u32 = u32::MAX;

/// Slack for comparing sums of floating-point values: a branch must beat the incumbent by more
/// than this to be explored, so ties keep the first plan found and rounding cannot loop.
const EPS: f64 = 1e-12;

const UNDECIDED: u8 = 0;
const IN: u8 = 1;
const OUT: u8 = 2;

/// The items of one knapsack instance, indexed alike.
pub(crate) struct Instance<'p> {
    /// Value of each item, finite and ≥ 0.
    pub(crate) value: &'p [f64],
    /// Cost of each item, ≥ 1.
    pub(crate) cost: &'p [u64],
    /// Parent of each item or [`NONE`]; a forest. Empty when no item has one.
    pub(crate) parent: &'p [u32],
    /// The budget.
    pub(crate) capacity: u64,
}

/// Limits past which the exact search gives way to the incumbent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Largest core the branch and bound runs on.
    pub(crate) exact_limit: usize,
    /// Nodes the branch and bound may visit.
    pub(crate) node_limit: u64,
}

/// Which items were selected, and how.
#[derive(Debug)]
pub(crate) struct Solution {
    /// One flag per item.
    pub(crate) selected: Vec<bool>,
    /// The method whose answer this is.
    pub(crate) method: PlanMethod,
}

/// Solves `inst`; `tie` orders items of equal density (the planner passes tool-name order), which
/// makes the result independent of the input order.
pub(crate) fn solve(
    inst: &Instance<'_>,
    limits: Limits,
    tie: impl Fn(u32, u32) -> Ordering,
) -> Solution {
    let n = inst.value.len();
    let total: u64 = inst.cost.iter().sum();
    if total <= inst.capacity {
        return Solution { selected: vec![true; n], method: PlanMethod::Exact };
    }
    let density: Vec<f64> = inst.value.iter().zip(inst.cost).map(|(&v, &w)| v / w as f64).collect();
    let by_density = |a: &u32, b: &u32| {
        density[*b as usize]
            .total_cmp(&density[*a as usize])
            .then_with(|| tie(*a, *b))
            .then_with(|| a.cmp(b))
    };
    let has_precedence = inst.parent.iter().any(|&p| p != NONE);
    let order = if has_precedence {
        let mut all: Vec<u32> = (0..n as u32).collect();
        all.sort_unstable_by(by_density);
        all
    } else {
        core(inst, &density, &by_density)
    };

    // Re-index into density order: position `p` holds item `order[p]`.
    let m = order.len();
    let v: Vec<f64> = order.iter().map(|&i| inst.value[i as usize]).collect();
    let w: Vec<u64> = order.iter().map(|&i| inst.cost[i as usize]).collect();
    let method = if !has_precedence {
        let (mut best, mut best_value) = incumbent_free(&v, &w, inst.capacity);
        let method = if m > limits.exact_limit
            || !search_free(&v, &w, inst.capacity, limits.node_limit, &mut best, &mut best_value)
        {
            PlanMethod::ApproxHalf
        } else {
            PlanMethod::Exact
        };
        (best, method)
    } else {
        let mut position = vec![0u32; n];
        for (p, &i) in order.iter().enumerate() {
            position[i as usize] = p as u32;
        }
        let par: Vec<u32> = order
            .iter()
            .map(|&i| match inst.parent[i as usize] {
                NONE => NONE,
                parent => position[parent as usize],
            })
            .collect();
        let (mut best, mut best_value) = incumbent(&v, &w, &par, inst.capacity);
        let exact = m <= limits.exact_limit && {
            let mut search = Search {
                v: &v,
                w: &w,
                par: &par,
                status: vec![UNDECIDED; m],
                log: Vec::new(),
                best: &mut best,
                best_value: &mut best_value,
                nodes: 0,
            };
            search.run(inst.capacity, limits.node_limit)
        };
        (best, if exact { PlanMethod::Exact } else { PlanMethod::Heuristic })
    };
    let (best, method) = method;

    let mut selected = vec![false; n];
    for (p, &i) in order.iter().enumerate() {
        selected[i as usize] = best[p];
    }
    Solution { selected, method }
}

/// Without precedence: the items that can matter, in density order — the top items by density up
/// to and including the critical one, then every later item the reduction cannot fix out.
fn core(
    inst: &Instance<'_>,
    density: &[f64],
    by_density: &impl Fn(&u32, &u32) -> Ordering,
) -> Vec<u32> {
    let n = inst.value.len();
    let (v, w, cap) = (inst.value, inst.cost, inst.capacity);
    let mut idx = top_overflowing(n, w, cap, density, by_density);
    let k = idx.len();

    // Dantzig bound, critical density, and the two ½-approximation candidates.
    let (mut room, mut bound, mut critical_density) = (cap, 0.0, 0.0);
    for &i in &idx[..k] {
        let (vi, wi) = (v[i as usize], w[i as usize]);
        if wi <= room {
            room -= wi;
            bound += vi;
        } else {
            bound += vi * room as f64 / wi as f64;
            critical_density = vi / wi as f64;
            break;
        }
    }
    let mut greedy = 0.0;
    let mut room = cap;
    for &i in &idx[..k] {
        if w[i as usize] <= room {
            room -= w[i as usize];
            greedy += v[i as usize];
        }
    }
    let single = best_single(v);
    let lower = greedy.max(v[single as usize]);

    let mut in_top = vec![false; n];
    for &i in &idx {
        in_top[i as usize] = true;
    }
    let mut extra: Vec<u32> = (0..n as u32)
        .filter(|&j| {
            !in_top[j as usize]
                && (j == single
                    || v[j as usize] + bound - critical_density * w[j as usize] as f64
                        > lower + EPS)
        })
        .collect();
    extra.sort_unstable_by(by_density);
    idx.extend_from_slice(&extra);
    idx
}

/// The shortest prefix of the items in density order whose cost exceeds `cap` (the caller checked
/// that all items together do), sorted. Kept as a sorted list while it is short, the usual case
/// with budgets of a few responses: one comparison rejects most items. When it grows long, the
/// prefix is found by selection instead.
fn top_overflowing(
    n: usize,
    w: &[u64],
    cap: u64,
    density: &[f64],
    by_density: &impl Fn(&u32, &u32) -> Ordering,
) -> Vec<u32> {
    const SHORT: usize = 64;
    let mut top: Vec<u32> = Vec::with_capacity(SHORT + 1);
    let mut weight = 0u64;
    for i in 0..n as u32 {
        if weight > cap {
            let last = *top.last().expect("an overflowing prefix is not empty");
            // A strictly lower density is out without the tie-breaks (the usual case).
            if density[i as usize] < density[last as usize] || by_density(&i, &last).is_gt() {
                continue;
            }
        }
        let at = top.partition_point(|x| by_density(x, &i).is_lt());
        top.insert(at, i);
        weight += w[i as usize];
        // Drop the last item while the prefix overflows without it.
        while let Some(&last) = top.last() {
            if weight - w[last as usize] > cap {
                weight -= w[last as usize];
                top.pop();
            } else {
                break;
            }
        }
        if top.len() > SHORT {
            return top_by_selection(n, w, cap, by_density);
        }
    }
    top
}

/// [`top_overflowing`] by growing a selected top-k until it overflows, then sorting it.
fn top_by_selection(
    n: usize,
    w: &[u64],
    cap: u64,
    by_density: &impl Fn(&u32, &u32) -> Ordering,
) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..n as u32).collect();
    let (mut k, mut weight, mut step) = (0usize, 0u64, 32usize);
    loop {
        let next = n.min(k + step);
        if next < n {
            idx[k..].select_nth_unstable_by(next - k - 1, by_density);
        }
        weight += idx[k..next].iter().map(|&i| w[i as usize]).sum::<u64>();
        k = next;
        if weight > cap || k == n {
            break;
        }
        step *= 4;
    }
    idx.truncate(k);
    idx.sort_unstable_by(by_density);
    // The shortest overflowing prefix.
    let mut room = cap;
    let mut end = idx.len();
    for (p, &i) in idx.iter().enumerate() {
        if w[i as usize] > room {
            end = p + 1;
            break;
        }
        room -= w[i as usize];
    }
    idx.truncate(end);
    idx
}

/// The item of highest value (the first on ties).
fn best_single(v: &[f64]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// [`incumbent`] without precedence: the density greedy or the best single item, whichever is
/// worth more, with no chain bookkeeping.
fn incumbent_free(v: &[f64], w: &[u64], cap: u64) -> (Vec<bool>, f64) {
    let mut chosen = vec![false; v.len()];
    let (mut room, mut value) = (cap, 0.0);
    for (p, (&vp, &wp)) in v.iter().zip(w).enumerate() {
        if wp <= room {
            room -= wp;
            value += vp;
            chosen[p] = true;
        }
    }
    let single = best_single(v) as usize;
    if v[single] > value + EPS {
        chosen.fill(false);
        chosen[single] = true;
        (chosen, v[single])
    } else {
        (chosen, value)
    }
}

/// The better of the density greedy and the best single item (with precedence: the best single
/// chain), over items in density order. Returns the selection and its value.
fn incumbent(v: &[f64], w: &[u64], par: &[u32], cap: u64) -> (Vec<bool>, f64) {
    let m = v.len();
    // Greedy: take each item (with its unselected ancestors) that still fits.
    let mut greedy = vec![false; m];
    let (mut room, mut greedy_value) = (cap, 0.0);
    for p in 0..m {
        if greedy[p] {
            continue;
        }
        let (mut dv, mut dw, mut a) = (v[p], w[p], par[p]);
        while a != NONE && !greedy[a as usize] {
            dv += v[a as usize];
            dw += w[a as usize];
            a = par[a as usize];
        }
        if dw <= room {
            room -= dw;
            greedy_value += dv;
            let mut a = p as u32;
            while a != NONE && !greedy[a as usize] {
                greedy[a as usize] = true;
                a = par[a as usize];
            }
        }
    }
    // Best single chain: chain value by memo over parents (a forest, so walks end).
    let mut chain_value = vec![f64::NAN; m];
    let mut stack = Vec::new();
    let (mut single, mut single_value) = (NONE, f64::NEG_INFINITY);
    for p in 0..m {
        let mut a = p as u32;
        while a != NONE && chain_value[a as usize].is_nan() {
            stack.push(a);
            a = par[a as usize];
        }
        let mut acc = if a == NONE { 0.0 } else { chain_value[a as usize] };
        while let Some(b) = stack.pop() {
            acc += v[b as usize];
            chain_value[b as usize] = acc;
        }
        if chain_value[p] > single_value {
            single_value = chain_value[p];
            single = p as u32;
        }
    }
    if single != NONE && single_value > greedy_value + EPS {
        let mut chosen = vec![false; m];
        let mut a = single;
        while a != NONE {
            chosen[a as usize] = true;
            a = par[a as usize];
        }
        (chosen, single_value)
    } else {
        (greedy, greedy_value)
    }
}

/// Branch and bound without precedence, over items in density order (Horowitz–Sahni): improves
/// `best` (a selection by position, worth `best_value`) to an optimal one; `false` when more than
/// `node_limit` bounds were computed first, `best` then being the best plan found so far.
fn search_free(
    v: &[f64],
    w: &[u64],
    capacity: u64,
    node_limit: u64,
    best: &mut [bool],
    best_value: &mut f64,
) -> bool {
    let m = v.len();
    // `sums[p]`: the value and cost of the items before position `p`.
    let mut sums: Vec<(f64, u64)> = Vec::with_capacity(m + 1);
    let (mut sv, mut sw) = (0.0, 0u64);
    sums.push((sv, sw));
    for (&vi, &wi) in v.iter().zip(w) {
        sv += vi;
        sw += wi;
        sums.push((sv, sw));
    }
    let (total_v, total_w) = (sv, sw);
    // The positions taken, in order: backtracking drops the last.
    let mut stack: Vec<usize> = Vec::with_capacity(m);
    let (mut value, mut room, mut j) = (0.0, capacity, 0usize);
    let mut nodes = 0u64;
    loop {
        if j < m {
            nodes += 1;
            if nodes > node_limit {
                return false;
            }
            // The Dantzig bound of the items from `j`: whole ones while they fit, then a part of
            // the first that does not (none when all fit).
            let limit = sums[j].1 + room;
            let bound = if total_w <= limit {
                value + (total_v - sums[j].0)
            } else {
                let t = j + sums[j..].partition_point(|&(_, c)| c <= limit) - 1;
                value + (sums[t].0 - sums[j].0) + v[t] * (limit - sums[t].1) as f64 / w[t] as f64
            };
            if bound > *best_value + EPS {
                // Forward: take what fits, in order; an item that does not fit is left out here
                // and reconsidered when backtracking frees room.
                while j < m {
                    if w[j] <= room {
                        room -= w[j];
                        value += v[j];
                        stack.push(j);
                        j += 1;
                    } else {
                        j += 1;
                        break;
                    }
                }
                if j < m {
                    continue;
                }
                if value > *best_value + EPS {
                    *best_value = value;
                    best.fill(false);
                    stack.iter().for_each(|&p| best[p] = true);
                }
            }
        }
        // Backtrack: leave out the last item taken and go on after it.
        let Some(i) = stack.pop() else { return true };
        room += w[i];
        value -= v[i];
        j = i + 1;
    }
}

/// One branching point of the depth-first search.
#[derive(Clone, Copy)]
struct Frame {
    /// Position being decided.
    j: usize,
    /// Undo-log length when the frame was created.
    log: usize,
    /// 0: include next; 1: exclude next; 2: done.
    state: u8,
    /// Value of the items already in.
    value: f64,
    /// Capacity left.
    room: u64,
}

/// Branch and bound over positions in density order.
struct Search<'s> {
    v: &'s [f64],
    w: &'s [u64],
    par: &'s [u32],
    status: Vec<u8>,
    /// Positions whose status changed, for undoing a branch.
    log: Vec<u32>,
    best: &'s mut Vec<bool>,
    best_value: &'s mut f64,
    nodes: u64,
}

impl Search<'_> {
    /// Explores the tree; `false` when the node budget ran out first.
    fn run(&mut self, capacity: u64, node_limit: u64) -> bool {
        let mut stack: Vec<Frame> = Vec::new();
        if let Some(frame) = self.visit(0, 0.0, capacity) {
            stack.push(frame);
        }
        while let Some(top) = stack.last_mut() {
            if self.nodes > node_limit {
                return false;
            }
            let frame = *top;
            top.state += 1;
            match frame.state {
                0 => {
                    // Include `j` and its undecided ancestors, unless one of them is out.
                    let (mut dv, mut dw, mut a) =
                        (self.v[frame.j], self.w[frame.j], self.par[frame.j]);
                    let mut feasible = true;
                    while a != NONE {
                        match self.status[a as usize] {
                            IN => break,
                            OUT => {
                                feasible = false;
                                break;
                            }
                            _ => {
                                dv += self.v[a as usize];
                                dw += self.w[a as usize];
                                a = self.par[a as usize];
                            }
                        }
                    }
                    if feasible && dw <= frame.room {
                        let mut a = frame.j as u32;
                        while a != NONE && self.status[a as usize] == UNDECIDED {
                            self.set(a, IN);
                            a = self.par[a as usize];
                        }
                        if let Some(child) =
                            self.visit(frame.j + 1, frame.value + dv, frame.room - dw)
                        {
                            stack.push(child);
                        }
                    }
                }
                1 => {
                    self.undo(frame.log);
                    self.set(frame.j as u32, OUT);
                    if let Some(child) = self.visit(frame.j + 1, frame.value, frame.room) {
                        stack.push(child);
                    }
                }
                _ => {
                    self.undo(frame.log);
                    stack.pop();
                }
            }
        }
        true
    }

    fn set(&mut self, p: u32, status: u8) {
        self.status[p as usize] = status;
        self.log.push(p);
    }

    fn undo(&mut self, to: usize) {
        for p in self.log.drain(to..) {
            self.status[p as usize] = UNDECIDED;
        }
    }

    /// Whether `p`'s chain has an excluded ancestor.
    fn blocked(&self, p: usize) -> bool {
        let mut a = self.par[p];
        while a != NONE {
            match self.status[a as usize] {
                OUT => return true,
                IN => return false,
                _ => a = self.par[a as usize],
            }
        }
        false
    }

    /// A node whose next decision is at position `j` or later: settles it when it can (leaf,
    /// everything left fits, or the bound cannot beat the incumbent), else returns the frame to
    /// branch on.
    fn visit(&mut self, mut j: usize, value: f64, room: u64) -> Option<Frame> {
        self.nodes += 1;
        let m = self.v.len();
        while j < m && self.status[j] != UNDECIDED {
            j += 1;
        }
        // Fractional (Dantzig) bound over the undecided items, in density order.
        let (mut bound, mut left, mut all_fit) = (value, room, true);
        for k in j..m {
            if self.status[k] != UNDECIDED {
                continue;
            }
            if self.w[k] <= left {
                left -= self.w[k];
                bound += self.v[k];
            } else {
                bound += self.v[k] * left as f64 / self.w[k] as f64;
                all_fit = false;
                break;
            }
        }
        if all_fit {
            // The rest fits: taking every item not blocked by an excluded ancestor is optimal
            // here (values are ≥ 0, and such a set is closed under ancestors).
            let takeable = |s: &Self, k: usize| s.status[k] == UNDECIDED && !s.blocked(k);
            let total =
                value + (j..m).filter(|&k| takeable(self, k)).map(|k| self.v[k]).sum::<f64>();
            if total > *self.best_value + EPS {
                *self.best_value = total;
                for p in 0..m {
                    self.best[p] = self.status[p] == IN || (p >= j && takeable(self, p));
                }
            }
            return None;
        }
        if bound <= *self.best_value + EPS {
            return None;
        }
        Some(Frame { j, log: self.log.len(), state: 0, value, room })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[f64], w: &[u64], par: &[u32], cap: u64, limits: Limits) -> Solution {
        solve(&Instance { value: v, cost: w, parent: par, capacity: cap }, limits, |a, b| a.cmp(&b))
    }

    const EXACT: Limits = Limits { exact_limit: usize::MAX, node_limit: u64::MAX };

    #[test]
    fn takes_the_optimum_where_density_greedy_does_not() {
        // Greedy by density takes items 0 and 1 (value 10); the optimum is items 1 and 2 (11).
        let v = [6.0, 4.0, 7.0];
        let w = [5, 4, 6];
        let s = run(&v, &w, &[NONE; 3], 10, EXACT);
        assert_eq!(s.selected, vec![false, true, true]);
        assert_eq!(s.method, PlanMethod::Exact);
    }

    #[test]
    fn precedence_is_honoured() {
        // Item 0 is worth a lot but needs item 1, which is expensive; together they do not fit
        // with item 2, which alone is worth less than the pair.
        let v = [5.0, 1.0, 4.0];
        let w = [1, 8, 5];
        let s = run(&v, &w, &[1, NONE, NONE], 10, EXACT);
        assert_eq!(s.selected, vec![true, true, false]);
        // Worth more than the pair, item 2 wins; item 0 cannot come without item 1.
        let s = run(&[5.0, 1.0, 7.0], &w, &[1, NONE, NONE], 10, EXACT);
        assert_eq!(s.selected, vec![false, false, true]);
        // The fallback honours precedence too, and says it has no ratio to promise.
        let s = run(&v, &w, &[1, NONE, NONE], 10, Limits { exact_limit: 0, node_limit: 0 });
        assert_eq!(s.selected, vec![true, true, false]);
        assert_eq!(s.method, PlanMethod::Heuristic);
    }

    #[test]
    fn the_fallback_keeps_the_better_of_greedy_and_the_best_single_item() {
        let v = [1.0, 0.3];
        let w = [100, 1];
        let s = run(&v, &w, &[NONE; 2], 100, Limits { exact_limit: 0, node_limit: 0 });
        assert_eq!(s.selected, vec![true, false]);
        assert_eq!(s.method, PlanMethod::ApproxHalf);
    }

    #[test]
    fn a_node_budget_that_runs_out_reports_the_fallback() {
        let v: Vec<f64> = (0..40).map(|i| 1.0 + (i % 7) as f64 * 0.01).collect();
        let w: Vec<u64> = (0..40).map(|i| 10 + (i % 5)).collect();
        let s = run(&v, &w, &[NONE; 40], 101, Limits { exact_limit: 1000, node_limit: 1 });
        assert_eq!(s.method, PlanMethod::ApproxHalf);
        let cost: u64 = w.iter().zip(&s.selected).filter(|(_, &x)| x).map(|(w, _)| w).sum();
        assert!(cost <= 101);
    }
}
