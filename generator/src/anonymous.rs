//! Injected work looks like application work (docs/records.md, "Injected work is
//! anonymous"): the kernel names, call sites, launch shapes, copy sizes and kernel
//! durations of injected work are seeded draws from the scenario's own
//! application work, on all three backends (sim, cuda, torch). Only the ground
//! truth (fault nodes, injection records) knows which work was injected.

use ground_truth::scenario::{Scenario, Step};
use ground_truth::seed::mix;
use ground_truth::Ns;

/// What injected kernels are named when the scenario launches no kernel of its own.
const FALLBACK_KERNEL: &str = "elementwise_kernel";

/// Each kind of draw has its own salt, so draws of different kinds are independent.
#[derive(Debug, Clone, Copy)]
#[repr(u64)]
enum Draw {
    KernelName = 0x6b6e_616d,
    CallSite = 0x6373_6974,
    CopyBytes = 0x6362_7974,
    Duration = 0x6475_7261,
    Grid = 0x6772_6964,
    Block = 0x626c_636b,
}

/// The distributions of a scenario's application work that injected work draws from.
#[derive(Debug, Clone)]
pub struct Disguise {
    seed: u64,
    /// The `names:` pool, else every application kernel's name with its multiplicity.
    kernel_names: Vec<String>,
    /// The call site of every application kernel launch and copy (`None`: no call-site frame).
    call_sites: Vec<Option<String>>,
    copy_bytes: Vec<u64>,
    kernel_durations_ns: Vec<Ns>,
    grids: Vec<u32>,
    blocks: Vec<u32>,
}

impl Disguise {
    /// The distributions of `sc`'s work; `seed` keys the run's draws.
    pub fn new(sc: &Scenario, seed: u64) -> Disguise {
        let mut d = Disguise {
            seed: mix(seed ^ 0x616e_6f6e),
            kernel_names: sc.names.clone(),
            call_sites: Vec::new(),
            copy_bytes: Vec::new(),
            kernel_durations_ns: Vec::new(),
            grids: Vec::new(),
            blocks: Vec::new(),
        };
        let own_names = sc.names.is_empty();
        let kernel = |d: &mut Disguise, name: &str, duration_us: f64, grid: u32, block: u32| {
            if own_names {
                d.kernel_names.push(name.to_string());
            }
            d.kernel_durations_ns
                .push((duration_us * 1000.0).round() as Ns);
            d.grids.push(grid);
            d.blocks.push(block);
        };
        for step in sc.programs.iter().flat_map(|p| &p.steps) {
            match step {
                Step::Kernel {
                    name,
                    duration_us,
                    grid,
                    block,
                    call_site,
                    ..
                } => {
                    kernel(&mut d, name, *duration_us, *grid, *block);
                    d.call_sites.push(call_site.clone());
                }
                Step::Copy {
                    bytes, call_site, ..
                } => {
                    d.copy_bytes.push(*bytes);
                    d.call_sites.push(call_site.clone());
                }
                _ => {}
            }
        }
        for n in sc.graphs.iter().flat_map(|g| &g.nodes) {
            let k = &n.kernel;
            kernel(&mut d, &k.name, k.duration_us, k.grid, k.block);
        }
        d
    }

    fn pick<'a, T>(&self, pool: &'a [T], what: Draw, draw: u64) -> Option<&'a T> {
        if pool.is_empty() {
            return None;
        }
        let i = mix(self.seed ^ mix(what as u64 ^ draw.wrapping_mul(0x9E37_79B9)));
        pool.get((i % pool.len() as u64) as usize)
    }

    /// The name of the `draw`-th injected kernel.
    pub fn kernel_name(&self, draw: u64) -> &str {
        self.pick(&self.kernel_names, Draw::KernelName, draw)
            .map(String::as_str)
            .unwrap_or(FALLBACK_KERNEL)
    }

    /// The call site of the `draw`-th injected call (`None`: the application's
    /// launches have no call-site frame either).
    pub fn call_site(&self, draw: u64) -> Option<&str> {
        self.pick(&self.call_sites, Draw::CallSite, draw)
            .and_then(|c| c.as_deref())
    }

    /// The size of the `draw`-th injected copy, if the application copies at all.
    pub fn copy_bytes(&self, draw: u64) -> Option<u64> {
        self.pick(&self.copy_bytes, Draw::CopyBytes, draw).copied()
    }

    /// The nominal duration of the `draw`-th injected kernel, if the application launches kernels.
    pub fn kernel_duration_ns(&self, draw: u64) -> Option<Ns> {
        self.pick(&self.kernel_durations_ns, Draw::Duration, draw)
            .copied()
            .filter(|&d| d > 0)
    }

    /// The grid of an injected kernel whose grid the mechanism leaves free.
    pub fn grid(&self, draw: u64, fallback: u32) -> u32 {
        self.pick(&self.grids, Draw::Grid, draw)
            .copied()
            .unwrap_or(fallback)
    }

    /// The launch configuration (grid, block) of the `draw`-th injected kernel,
    /// drawn from the application's kernels whose grid `fits` (the mechanism's
    /// need, e.g. a grid covering the SMs). `None`: no application kernel fits.
    pub fn launch_configuration(
        &self,
        draw: u64,
        fits: impl Fn(u32) -> bool,
    ) -> Option<(u32, u32)> {
        let fitting: Vec<(u32, u32)> = self
            .grids
            .iter()
            .zip(&self.blocks)
            .filter(|(grid, _)| fits(**grid))
            .map(|(grid, block)| (*grid, *block))
            .collect();
        self.pick(&fitting, Draw::Grid, draw).copied()
    }

    pub fn block(&self, draw: u64, fallback: u32) -> u32 {
        self.pick(&self.blocks, Draw::Block, draw)
            .copied()
            .unwrap_or(fallback)
    }

    /// Splits `total_ns` of injected device time into kernels of application-like
    /// durations: draws durations until the next one would overshoot by more than
    /// half of itself, then scales them so they sum to `total_ns` exactly. Without
    /// application kernels, or for a total shorter than one, it is one kernel.
    /// `gap_ns` is the idle time between two pieces (their dispatch).
    pub fn kernel_pieces(&self, total_ns: Ns, gap_ns: Ns, max_pieces: usize) -> Vec<Ns> {
        let mut pieces: Vec<Ns> = Vec::new();
        let mut sum: Ns = 0;
        for draw in 0..max_pieces as u64 {
            let Some(d) = self.kernel_duration_ns(draw) else {
                break;
            };
            let gap = if pieces.is_empty() { 0 } else { gap_ns };
            if !pieces.is_empty() && sum + gap + d / 2 > total_ns {
                break;
            }
            pieces.push(d);
            sum += gap + d;
        }
        if pieces.is_empty() {
            return vec![total_ns];
        }
        let gaps = gap_ns * (pieces.len() as Ns - 1);
        let busy = total_ns.saturating_sub(gaps).max(pieces.len() as Ns);
        let drawn: Ns = pieces.iter().sum();
        let mut left = busy;
        let n = pieces.len();
        for (i, p) in pieces.iter_mut().enumerate() {
            *p = if i + 1 == n {
                left
            } else {
                ((*p as f64) * busy as f64 / drawn as f64).round() as Ns
            }
            .max(1);
            left = left.saturating_sub(*p);
        }
        pieces
    }

    /// Sizes of injected copies that together hold a copy engine for about
    /// `total_ns`, each drawn from the application's copy sizes (`ns_of` gives a
    /// size's engine time). Without application copies: `None`.
    pub fn copy_sizes(
        &self,
        total_ns: Ns,
        ns_of: impl Fn(u64) -> Ns,
        max: usize,
    ) -> Option<Vec<u64>> {
        let mut sizes = Vec::new();
        let mut sum: Ns = 0;
        for draw in 0..max as u64 {
            let bytes = self.copy_bytes(draw)?;
            let d = ns_of(bytes);
            if !sizes.is_empty() && sum + d / 2 > total_ns {
                break;
            }
            sizes.push(bytes);
            sum += d;
        }
        Some(sizes)
    }
}

/// A seeded permutation of `0..n`: the order in which ids are handed out.
pub fn shuffled(seed: u64, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| mix(seed ^ mix(0x6f72_6465 ^ i as u64)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use ground_truth::io::Readable;

    fn scenario(names: &str) -> Scenario {
        let yaml = format!(
            "schema_version: 1\nname: t.a\nfamily: t\nvariant: a\ncause: none\n\
             threads: [{{name: host}}]\nstreams: [{{name: s}}]\n{names}\
             programs:\n  - name: p\n    start: host\n    steps:\n      \
             - {{op: kernel, id: a, stream: s, name: gemm, duration_us: 200, call_site: \"m.py:1\"}}\n      \
             - {{op: kernel, id: b, stream: s, name: softmax, duration_us: 300, grid: 64}}\n      \
             - {{op: copy, id: c, stream: s, direction: h2d, bytes: 4096}}\n\
             symptom: {{step: a}}\n"
        );
        Scenario::parse(std::path::Path::new("t.yaml"), yaml.as_bytes()).unwrap()
    }

    #[test]
    fn draws_come_from_the_application_or_the_pool() {
        let own = Disguise::new(&scenario(""), 7);
        let pooled = Disguise::new(&scenario("names: [attn_fwd]\n"), 7);
        for draw in 0..50 {
            assert!(["gemm", "softmax"].contains(&own.kernel_name(draw)));
            assert_eq!(pooled.kernel_name(draw), "attn_fwd");
            assert!([None, Some("m.py:1")].contains(&own.call_site(draw)));
            assert_eq!(own.copy_bytes(draw), Some(4096));
            assert!([132, 64].contains(&own.grid(draw, 1)));
        }
        for draw in 0..50 {
            assert!([Some((132, 128)), Some((64, 128))]
                .contains(&own.launch_configuration(draw, |_| true)));
            assert_eq!(
                own.launch_configuration(draw, |g| g >= 100),
                Some((132, 128))
            );
            assert_eq!(own.launch_configuration(draw, |g| g > 132), None);
        }
        let names: std::collections::HashSet<&str> = (0..50).map(|d| own.kernel_name(d)).collect();
        assert_eq!(names.len(), 2, "both application names are drawn");
    }

    #[test]
    fn pieces_fill_the_total_exactly_with_application_like_durations() {
        let d = Disguise::new(&scenario(""), 3);
        for total in [1_000, 150_000, 5_000_000] {
            let pieces = d.kernel_pieces(total, 3_000, 64);
            let gaps = 3_000 * (pieces.len() as Ns - 1);
            assert_eq!(pieces.iter().sum::<Ns>() + gaps, total.max(gaps + 1));
            if total >= 1_000_000 {
                assert!(pieces.len() > 10);
                assert!(pieces.iter().all(|&p| (150_000..=400_000).contains(&p)));
            }
        }
    }
}
