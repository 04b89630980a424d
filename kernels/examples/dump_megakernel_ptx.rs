//! Print the megakernel's PTX: `cargo run -p kernels --example dump_megakernel_ptx [-- compute_90]`.
fn main() {
    let arch = std::env::args().nth(1);
    match kernels::megakernel::compile_ptx(arch.as_deref()) {
        Ok(ptx) => print!("{ptx}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
