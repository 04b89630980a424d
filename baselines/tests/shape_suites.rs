//! Writes the real-program-shape scenarios (docs/scenario-space.md, "Real program shapes") to a
//! folder so `causalbench run --suite DIR` can score the reference on them alone. Ignored: it
//! writes files; run with `SHAPE_SUITE_DIR=/some/dir cargo test -p baselines --test shape_suites
//! -- --ignored` (the dev split's shapes; `honest.rs` records test-split instances of its own).

use scenario_space::{generate, Split, DEV_SEED, SHAPES};

#[test]
#[ignore = "writes scenario files into $SHAPE_SUITE_DIR"]
fn write_shape_suite() {
    let Ok(dir) = std::env::var("SHAPE_SUITE_DIR") else {
        eprintln!("SHAPE_SUITE_DIR unset: nothing written");
        return;
    };
    std::fs::create_dir_all(&dir).expect("create the suite folder");
    let shape_names: Vec<&str> = SHAPES.iter().map(|f| f.name).collect();
    let scenarios = generate(Split::Dev, DEV_SEED, 300);
    let mut written = 0;
    for scenario in scenarios {
        if !shape_names
            .iter()
            .any(|n| scenario.name.starts_with(&format!("{n}.")))
        {
            continue;
        }
        let text = serde_json::to_string_pretty(&scenario).expect("a scenario serializes");
        std::fs::write(format!("{dir}/{}.yaml", scenario.name), text).expect("write a scenario");
        written += 1;
    }
    eprintln!("wrote {written} shape scenarios into {dir}");
}
