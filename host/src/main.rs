//! The `sluice` binary. Everything lives in the library (`sluice::cli`),
//! so the end-to-end suites can build the same program.

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
