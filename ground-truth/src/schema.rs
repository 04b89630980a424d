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
];

/// The JSON Schema of a format, pretty-printed, or `None` for an unknown name.
pub fn schema(name: &str) -> Option<String> {
    let s = match name {
        "scenario" => schema_for!(crate::Scenario),
        "bundle" => schema_for!(crate::Bundle),
        "view" => schema_for!(crate::TraceView),
        "explanation" => schema_for!(crate::Explanation),
        _ => return None,
    };
    Some(serde_json::to_string_pretty(&s).expect("schemas serialize"))
}
