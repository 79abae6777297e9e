//! The `sluice` program for the end-to-end suites (see `tests/Cargo.toml`).

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
