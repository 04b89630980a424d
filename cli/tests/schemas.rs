//! Every catalog scenario records on the simulator, and the scenario, its
//! bundle, a view and an explanation all validate against the JSON Schemas
//! that `causalbench schema NAME` prints.

use ground_truth::io::Readable;
use std::path::Path;

fn validator(name: &str) -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&ground_truth::schema::schema(name).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("schema {name} compiles: {e}"))
}

fn check(v: &jsonschema::Validator, what: &str, value: &serde_json::Value) {
    let errors: Vec<String> = v
        .iter_errors(value)
        .take(5)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{what} does not validate: {errors:#?}");
}

#[test]
fn catalog_validates_against_schemas() {
    let (scenario_v, bundle_v, view_v, expl_v) = (
        validator("scenario"),
        validator("bundle"),
        validator("view"),
        validator("explanation"),
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalog");
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        let yaml: serde_json::Value =
            serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        check(&scenario_v, &path.display().to_string(), &yaml);
        let sc = ground_truth::Scenario::read(&path).unwrap();
        let bundle = generator::select_backend(generator::BackendKind::Sim)
            .unwrap()
            .record(&sc, 0)
            .unwrap();
        check(
            &bundle_v,
            &format!("bundle of {}", sc.name),
            &serde_json::to_value(&bundle).unwrap(),
        );
        let spec = ground_truth::ViewSpec {
            collectors: ground_truth::Collectors::Combined,
            mode: ground_truth::Mode::Instrumented,
            loss: ground_truth::view::LossSpec::Targeted { seed: 3 },
        };
        let view = views::derive(&bundle, spec).view;
        check(
            &view_v,
            &format!("view of {}", sc.name),
            &serde_json::to_value(&view).unwrap(),
        );
        let e = baselines::builtin("causal-graph").unwrap().explain(&view);
        check(
            &expl_v,
            &format!("explanation of {}", sc.name),
            &serde_json::to_value(&e).unwrap(),
        );
        n += 1;
    }
    assert_eq!(n, 27, "catalog size");
}
