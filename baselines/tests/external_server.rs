//! The batch (server) form of the external-profiler protocol (baselines/PROTOCOL.md,
//! "Batch form"): one process answers many views of one kind and lane, sees only the
//! view it is asked about, and a hung, crashed, oversized or invalid answer is that
//! view's failure, after which a new process answers the next view.

use baselines::synth::{ViewBuilder, US};
use baselines::{Confinement, ExternalCommand, ExternalError};
use ground_truth::view::{LossSpec, ViewSpec};
use ground_truth::{Collectors, Mode, Question, Readable, TraceView};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn python3() -> bool {
    let there = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !there {
        eprintln!("skipped: python3 is not installed");
    }
    there
}

/// A view of one launch whose query id tells the test server what to do.
fn view(dir: &Path, name: &str, query: &str, collectors: Collectors) -> (PathBuf, TraceView) {
    let mut b = ViewBuilder::new();
    let l = b.launch_at(
        10,
        "cudaLaunchKernel",
        1_000_000,
        1,
        "k",
        None,
        None,
        50 * US,
        "a.py:1",
    );
    b.query(query, l.op, Question::Cause);
    let mut v = b.build();
    v.spec = ViewSpec {
        collectors,
        mode: Mode::Instrumented,
        loss: LossSpec::None,
    };
    let p = dir.join(format!("{name}.json"));
    v.write(&p).unwrap();
    (p, v)
}

/// A server that answers each request with an explanation whose `meta.version` is
/// `TOKEN:FILES:SECRET`: TOKEN drawn once per process, FILES the number of files it
/// can list beside the view, SECRET whether it could list the directory named by its
/// first argument. The query id `hang`, `crash`, `big` or `bad` makes it misbehave.
const SERVER: &str = r#"
import json, os, sys, time
token = os.urandom(6).hex()
secret = sys.argv[1]
listener = None

def probe(token):
    """Leaves a file and an abstract socket behind, then tries to reach another
    server's (named in target.txt beside this script) and every process it sees."""
    global listener
    import socket
    home = os.environ["HOME"]
    with open(os.path.join(home, "mine"), "w") as f:
        f.write(token)
    if listener is None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("\0causalbench-test-" + os.path.basename(os.path.dirname(home)))
        listener.listen()
    found = {"home": home}
    other = open(sys.argv[2]).read()
    if other:
        try:
            open(os.path.join(other, "mine")).read()
            found["file"] = "read"
        except OSError:
            found["file"] = "refused"
        try:
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect("\0causalbench-test-" + os.path.basename(os.path.dirname(other)))
            found["unix"] = "connected"
        except OSError:
            found["unix"] = "refused"
        me = os.readlink("/proc/self")
        reached = []
        for pid in [p for p in os.listdir("/proc") if p.isdigit() and p != me]:
            # kill() names pids of its own PID namespace, where it is 1 itself.
            try:
                if int(pid) != os.getpid():
                    os.kill(int(pid), 0)
                    reached.append("signal " + pid)
            except OSError:
                pass
            try:
                open("/proc/%s/mem" % pid, "rb").close()
                reached.append("mem " + pid)
            except OSError:
                pass
        found["proc"] = reached
        try:
            socket.create_connection(("127.0.0.1", 1), timeout=2)
            found["net"] = "connected"
        except OSError:
            found["net"] = "refused"
    return json.dumps(found).replace(":", "=")
for line in sys.stdin:
    req = json.loads(line)
    with open(req["view"]) as f:
        view = json.load(f)
    q = view["queries"][0]["id"]
    try:
        os.listdir(secret)
        seen = "read"
    except OSError:
        seen = "refused"
    files = len(os.listdir(os.path.dirname(req["view"])))
    if q == "hang":
        time.sleep(3600)
    if q == "crash":
        sys.exit(3)
    if q == "big":
        sys.stdout.write("x" * 5000 + "\n")
        sys.stdout.flush()
        continue
    if q == "bad":
        sys.stdout.write('{"schema_version": 1}\n')
        sys.stdout.flush()
        continue
    if q == "probe":
        seen = probe(token)
    print(f"answered {q}", file=sys.stderr)
    answer = {"schema_version": 1,
              "meta": {"profiler": "s", "version": f"{token}:{files}:{seen}",
                       "view": view["spec"], "wall_ms": 1.0},
              "edges": [], "attribution": [], "diagnoses": []}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"#;

struct Setup {
    dir: tempfile::TempDir,
    command: ExternalCommand,
}

/// How a server is declared: started cold, or forked warm (PROTOCOL.md "Warm start").
const FORMS: [&str; 2] = ["serve:", "serve[python]:"];

/// The test server declared as `form`, with a private results directory it must not read.
fn setup_as(form: &str, lane: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    std::fs::create_dir_all(results.join("bundles")).unwrap();
    std::fs::write(results.join("bundles/b.json"), "{}").unwrap();
    let script = dir.path().join("server.py");
    std::fs::write(&script, SERVER).unwrap();
    // Each test its own template, so that no two tests share a server.
    // Where the isolation test names another server's home: empty until then.
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "").unwrap();
    let command = ExternalCommand::new(format!(
        "{form} python3 {} {} {}",
        script.display(),
        results.display(),
        target.display()
    ))
    .with_confinement(Confinement::IsolatedIfAvailable)
    .with_timeout(Duration::from_secs(20))
    .with_max_output(4096)
    .protecting(&results)
    .in_lane(lane);
    Setup { dir, command }
}

fn ask(
    s: &Setup,
    name: &str,
    query: &str,
    collectors: Collectors,
) -> Result<String, ExternalError> {
    let views = s.dir.path().join("results/views");
    std::fs::create_dir_all(&views).unwrap();
    let (path, v) = view(&views, name, query, collectors);
    let out = s
        .dir
        .path()
        .join(format!("results/explanations/{name}.json"));
    let (answer, cost) = s
        .command
        .clone()
        .with_stderr_log(s.dir.path().join(format!("results/logs/{name}.log")))
        .run_measured(&v, &path, &out);
    assert!(
        cost.is_some(),
        "{name}: every answer is measured: {:?}",
        answer.as_ref().err()
    );
    answer.map(|e| e.meta.version)
}

fn token(version: &str) -> &str {
    version.split(':').next().unwrap()
}

#[test]
fn one_process_answers_the_views_of_one_kind_and_lane_seeing_only_the_asked_view() {
    if python3() {
        for form in FORMS {
            one_process_answers_the_views_of_one_kind_and_lane_seeing_only_the_asked_view_as(form);
        }
    }
}

fn one_process_answers_the_views_of_one_kind_and_lane_seeing_only_the_asked_view_as(form: &str) {
    let s = setup_as(form, 0);
    let a = ask(&s, "a", "q", Collectors::Cupti).unwrap();
    let b = ask(&s, "b", "q", Collectors::Cupti).unwrap();
    assert_eq!(token(&a), token(&b), "one process for views of one kind");
    let parts: Vec<&str> = a.split(':').collect();
    assert_eq!(
        parts[1], "1",
        "only the view asked about is in its directory"
    );
    if baselines::sandbox::kernel_abi().is_some_and(|abi| abi >= baselines::sandbox::MIN_ABI) {
        assert_eq!(
            parts[2], "refused",
            "the results directory is out of its reach"
        );
    } else {
        eprintln!("(no Landlock here: the results directory's refusal is not checked)");
    }
    // Another kind of view (another view of the same bundle, say) meets another process.
    let c = ask(&s, "c", "q", Collectors::Host).unwrap();
    assert_ne!(token(&a), token(&c));
    // And so does another lane (another variant of the same family instance).
    let other = Setup {
        command: s.command.clone().in_lane(1),
        dir: tempfile::tempdir().unwrap(),
    };
    let d = ask(&other, "d", "q", Collectors::Cupti).unwrap();
    assert_ne!(token(&a), token(&d));
    // What it wrote to stderr while answering a view is that view's log.
    let log = std::fs::read_to_string(s.dir.path().join("results/logs/b.log")).unwrap();
    assert_eq!(log.trim(), "answered q");
}

#[test]
fn a_hung_answer_fails_its_view_and_a_new_process_answers_the_next() {
    if python3() {
        for form in FORMS {
            a_hung_answer_fails_its_view_and_a_new_process_answers_the_next_as(form);
        }
    }
}

fn a_hung_answer_fails_its_view_and_a_new_process_answers_the_next_as(form: &str) {
    let mut s = setup_as(form, 0);
    s.command = s.command.with_timeout(Duration::from_secs(2));
    let first = ask(&s, "a", "q", Collectors::Combined).unwrap();
    let hung = ask(&s, "b", "hang", Collectors::Combined).unwrap_err();
    assert!(matches!(hung, ExternalError::Timeout { .. }), "{hung}");
    assert!(hung.is_the_programs());
    let next = ask(&s, "c", "q", Collectors::Combined).unwrap();
    assert_ne!(token(&first), token(&next), "the hung process was replaced");
}

#[test]
fn a_crash_an_oversized_and_an_invalid_answer_are_each_that_views_failure() {
    if python3() {
        for form in FORMS {
            a_crash_an_oversized_and_an_invalid_answer_are_each_that_views_failure_as(form);
        }
    }
}

fn a_crash_an_oversized_and_an_invalid_answer_are_each_that_views_failure_as(form: &str) {
    let s = setup_as(form, 0);
    let crash = ask(&s, "a", "crash", Collectors::Combined).unwrap_err();
    assert!(matches!(crash, ExternalError::Failed { .. }), "{crash}");
    assert!(ask(&s, "b", "q", Collectors::Combined).is_ok());
    let big = ask(&s, "c", "big", Collectors::Combined).unwrap_err();
    assert!(
        matches!(big, ExternalError::TooLarge { limit: 4096, .. }),
        "{big}"
    );
    assert!(ask(&s, "d", "q", Collectors::Combined).is_ok());
    let bad = ask(&s, "e", "bad", Collectors::Combined).unwrap_err();
    assert!(matches!(bad, ExternalError::Invalid(_)), "{bad}");
    assert!(bad.is_the_programs());
    assert!(ask(&s, "f", "q", Collectors::Combined).is_ok());
}

#[test]
fn a_server_template_names_no_per_view_path() {
    let c = ExternalCommand::new("serve: prof --in {view}");
    assert!(c.is_server());
    assert!(matches!(
        c.server_arguments(),
        Err(ExternalError::Template { .. })
    ));
    let c = ExternalCommand::new("serve: python3 'my server.py' --serve");
    assert_eq!(
        c.arguments(Path::new("v"), Path::new("o")).unwrap(),
        ["python3", "my server.py", "--serve"]
    );
    assert!(!ExternalCommand::new("prof {view} {out}").is_server());
}

#[test]
fn the_example_profiler_answers_in_batch_as_it_does_per_view() {
    if !python3() {
        return;
    }
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/profilers/minimal.py");
    let dir = tempfile::tempdir().unwrap();
    let (path, v) = view(dir.path(), "v", "q", Collectors::Combined);
    let per_view = ExternalCommand::new(format!("python3 {} {{view}} {{out}}", example.display()))
        .with_confinement(Confinement::IsolatedIfAvailable)
        .run_on(&v, &path, &dir.path().join("one.json"))
        .unwrap();
    let batch = ExternalCommand::new(format!("serve: python3 {} --serve", example.display()))
        .with_confinement(Confinement::IsolatedIfAvailable)
        .run_on(&v, &path, &dir.path().join("batch.json"))
        .unwrap();
    assert_eq!(per_view.edges, batch.edges);
    assert_eq!(per_view.diagnoses, batch.diagnoses);
    assert_eq!(per_view.attribution, batch.attribution);
}

#[test]
fn servers_of_other_lanes_reach_none_of_each_others_files_sockets_or_processes() {
    if !python3() || !baselines::zygote::available(&ExternalCommand::new("serve: python3 x")) {
        eprintln!("skipped: no Landlock or namespaces here");
        return;
    }
    for form in FORMS {
        let s = setup_as(form, 0);
        let first = ask(&s, "a", "probe", Collectors::Combined).unwrap();
        let found = |version: &str| -> serde_json::Value {
            let json = version.splitn(3, ':').nth(2).unwrap().replace('=', ":");
            serde_json::from_str(&json).unwrap()
        };
        let home = found(&first)["home"].as_str().unwrap().to_string();
        std::fs::write(s.dir.path().join("target.txt"), &home).unwrap();
        let other = Setup {
            command: s.command.clone().in_lane(1),
            dir: tempfile::tempdir().unwrap(),
        };
        let second = ask(&other, "b", "probe", Collectors::Combined).unwrap();
        let reached = found(&second);
        assert_ne!(token(&first), token(&second));
        assert_eq!(reached["file"], "refused", "{form}: {reached}");
        assert_eq!(reached["unix"], "refused", "{form}: {reached}");
        assert_eq!(reached["net"], "refused", "{form}: {reached}");
        assert_eq!(reached["proc"], serde_json::json!([]), "{form}: {reached}");
    }
}

#[test]
fn a_warm_start_names_a_preload_set_and_a_python_script() {
    let unknown = ExternalCommand::new("serve[rust]: python3 s.py");
    let err = unknown.server_arguments().unwrap_err().to_string();
    assert!(err.contains("python, hta"), "{err}");
    for not_a_script in ["serve[python]: node s.js", "serve[python]: python3 -m mod"] {
        let err = ExternalCommand::new(not_a_script).server_arguments();
        assert!(
            matches!(err, Err(ExternalError::Template { .. })),
            "{not_a_script}"
        );
    }
    let c = ExternalCommand::new("serve[hta]: python3 'my server.py' --serve");
    assert!(c.is_server());
    assert_eq!(
        c.server_arguments().unwrap(),
        ["python3", "my server.py", "--serve"]
    );
}
