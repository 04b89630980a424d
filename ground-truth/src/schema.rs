//! JSON Schemas generated from the format types (`causalbench schema NAME`).

use schemars::schema_for;

/// Names accepted by [`schema`], with what each documents.
pub const NAMES: &[(&str, &str)] = &[
    ("scenario", "scenario file (YAML or JSON)"),
    (
        "bundle",
        "run bundle: manifest, ground truth, trace, loss accounting",
    ),
    ("view", "trace view given to a profiler"),
    ("explanation", "profiler output"),
    (
        "collector-costs",
        "what each collector configuration costs (`measure collectors`)",
    ),
    (
        "collector-records",
        "a collector's records, as its converter writes them (baselines/COLLECTORS.md)",
    ),
    (
        "megakernel-scenario",
        "megakernel track scenario (YAML or JSON)",
    ),
    (
        "task-telemetry",
        "megakernel track sidecar: monitor captures and task truth",
    ),
    (
        "task-view",
        "megakernel track view: trace view plus one capture",
    ),
    (
        "submission",
        "metadata.json of a leaderboard submission (causalbench submit)",
    ),
    (
        "reproduction",
        "reproduction.json of a submission re-run by causalbench check --rerun",
    ),
];

/// The JSON Schema of a format, pretty-printed, or `None` for an unknown name.
pub fn schema(name: &str) -> Option<String> {
    let s = match name {
        "scenario" => schema_for!(crate::Scenario),
        "bundle" => schema_for!(crate::Bundle),
        "view" => schema_for!(crate::TraceView),
        "explanation" => schema_for!(crate::Explanation),
        "collector-costs" => schema_for!(crate::costs::CollectorCosts),
        "collector-records" => schema_for!(crate::collector::CollectorRecords),
        "megakernel-scenario" => schema_for!(crate::megakernel::MkScenario),
        "task-telemetry" => schema_for!(crate::megakernel::TaskTelemetry),
        "task-view" => schema_for!(crate::megakernel::TaskView),
        "submission" => schema_for!(crate::submission::Submission),
        "reproduction" => schema_for!(crate::submission::Reproduction),
        _ => return None,
    };
    Some(serde_json::to_string_pretty(&s).expect("schemas serialize"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn schemas_of_the_megakernel_track_formats_generate() {
        for n in ["megakernel-scenario", "task-telemetry", "task-view"] {
            let s = super::schema(n).unwrap();
            assert!(s.contains("\"properties\""), "{n}");
        }
    }
}
