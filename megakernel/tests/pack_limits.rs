//! The case-pack reader keeps the input-size policy of every reader
//! (README "Limits"): a gzip stream may not expand past its limit.

use flate2::write::GzEncoder;
use megakernel::pack;
use std::io::Write;

#[test]
fn a_gzip_bomb_pack_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.cases.jsonl.gz");
    let mut gz = GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::best(),
    );
    // 64 MiB of blank lines compress about a thousand times.
    let blank = vec![b'\n'; 1 << 20];
    for _ in 0..64 {
        gz.write_all(&blank).unwrap();
    }
    gz.finish().unwrap();
    let e = pack::read(&path).expect_err("a gzip bomb is refused");
    assert!(
        e.message.contains("the limit of a gzip stream's expansion"),
        "{e}"
    );
    assert!(e.to_string().contains("bomb.cases.jsonl.gz"), "{e}");
}
