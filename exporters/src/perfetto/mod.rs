//! Bundle (optionally one view of it) and explanation → Perfetto.
//!
//! Two traces per case, each in Perfetto's native protobuf format (a `Trace` message:
//! a stream of `TracePacket`s with `TrackDescriptor`s and `TrackEvent`s, encoded with
//! hand-written `prost` messages whose field numbers are those of Perfetto's
//! `trace_packet.proto`, `track_event.proto`, `track_descriptor.proto`,
//! `debug_annotation.proto`) and as Chrome JSON:
//!
//! - **truth** ([`truth_model`]): every record with an interval is a slice (a
//!   zero-length record an instant) on the track of its host thread or device stream;
//!   every ground-truth edge is a flow from the slice of its source node to an instant
//!   named `← TYPE` on the track of its destination; nodes no shown record observes
//!   (lost records, nodes without records) get a slice on the `ground truth · unrecorded
//!   nodes` track so every flow has both ends. The symptom's slice is prefixed `⚠`, the
//!   injection target's `💉`, and both are marked by instants on the `marks` track.
//! - **claimed** ([`claimed_model`]): the same slices; one flow per claimed edge
//!   (`src ≠ dst`, both records shown) ending at an instant named
//!   `← TYPE · EVIDENCE CONF ✓|✗` (✓ = the edge is in the ground truth), so instants of one
//!   evidence class share a name and a colour; `missing` claims are instants
//!   `missing predecessor (claimed)`; each diagnosis is an instant on the profiler's track.
//!
//! Tracks: process `host` with one thread track per host thread (API calls on the thread
//! track itself; NVTX, uprobes, scheduler, page faults and markers on child tracks);
//! process `GPU d` with one track per stream (device ops, event records; stream
//! syncs on a child track) and a `synchronization` track; process `causalbench` with
//! the marks. Records that overlap without nesting go to extra child lanes (`… #2`),
//! since Perfetto slices on one track must nest.

mod chrome;
mod claimed;
mod layout;
mod model;
pub mod proto;
mod protobuf;
mod slices;
mod truth;

pub use chrome::{to_chrome_json, write_chrome_json};
pub use claimed::claimed_model;
pub use model::{Arg, Flow, Model, ModelStats, Slice, Track, TrackKind};
pub use protobuf::{encode_perfetto, write_perfetto};
pub use slices::injection_target;
pub use truth::truth_model;

use ground_truth::{Bundle, Explanation, TraceView};

/// Files written by [`export_case`].
#[derive(Debug, Clone, Default)]
pub struct Written {
    pub files: Vec<std::path::PathBuf>,
    pub truth: ModelStats,
    pub claimed: Option<ModelStats>,
    pub skipped: Vec<String>,
}

/// Writes `truth.perfetto-trace` + `truth.json`, and with an explanation
/// `claimed.perfetto-trace` + `claimed.json`, into `dir`.
pub fn export_case(
    bundle: &Bundle,
    view: Option<&TraceView>,
    explanation: Option<&Explanation>,
    dir: &std::path::Path,
) -> std::io::Result<Written> {
    let mut w = Written::default();
    // Each model is streamed into its two files and dropped before the next is
    // built: an export holds one model and never a whole encoded file.
    let put = |name: &str, m: &Model, w: &mut Written| -> std::io::Result<()> {
        let p = dir.join(name);
        if name.ends_with(".json") {
            crate::write_file_with(&p, |out| write_chrome_json(m, out))?;
        } else {
            crate::write_file_with(&p, |out| write_perfetto(m, out))?;
        }
        w.files.push(p);
        Ok(())
    };
    let t = truth_model(bundle, view);
    w.truth = t.stats();
    put("truth.perfetto-trace", &t, &mut w)?;
    put("truth.json", &t, &mut w)?;
    drop(t);
    if let Some(x) = explanation {
        let c = claimed_model(bundle, view, x);
        w.claimed = Some(c.stats());
        w.skipped = c.skipped.clone();
        put("claimed.perfetto-trace", &c, &mut w)?;
        put("claimed.json", &c, &mut w)?;
    }
    Ok(w)
}
