//! Embeds `libcudablame.so` and the simulated driver (`libfakecuda.so`) into the `cudablame`
//! command when it is built to be installed on its own (`cargo install`, a pip wheel), so that the
//! installed command carries what it preloads (see `src/locate.rs`: extracted on first use to
//! `$XDG_CACHE_HOME/cudablame/<version>-<hash>/`).
//!
//! Cargo cannot make a binary depend on its own package's cdylib, so this script builds the two
//! libraries with a nested `cargo build` into a separate target directory (the nested build skips
//! this step). When to embed:
//! * `CUDABLAME_EMBED=1` or the `embed` feature (the wheel sets it): always;
//! * `CUDABLAME_EMBED=0`: never;
//! * otherwise: when the target directory is not this repository's own `target/`, which is what
//!   `cargo install --path .` does (a temporary target directory). The repository's own builds
//!   (`cargo build --release --workspace`, `scripts/test.sh`) leave the libraries beside the
//!   command in `target/release/` and pay nothing for embedding.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CUDABLAME_EMBED");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    // The workspace root (this crate is crates/cli): the preload library is its root package.
    let root = manifest.join("../..");
    let empty =
        "pub const LIB: &[u8] = &[];\npub const FAKE: &[u8] = &[];\npub const HASH: &str = \"\";\n";
    let inner = std::env::var_os("CUDABLAME_EMBED_INNER").is_some();
    // OUT_DIR = <target>/<profile>/build/<package>-<hash>/out
    let target_dir = out.ancestors().nth(4).map(Path::to_path_buf);
    let own_target = target_dir
        .as_deref()
        .zip(root.join("target").canonicalize().ok())
        .is_some_and(|(t, m)| t.canonicalize().is_ok_and(|t| t == m));
    let embed = match std::env::var("CUDABLAME_EMBED").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => std::env::var_os("CARGO_FEATURE_EMBED").is_some() || !own_target,
    };
    if inner || !embed {
        write(&out.join("embedded.rs"), empty);
        return;
    }
    for dir in ["src", "crates/report", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let fake_dir = root.join("shim-tests/fake-driver");
    let with_fake = fake_dir.join("Cargo.toml").is_file();
    if with_fake {
        println!("cargo:rerun-if-changed={}", fake_dir.display());
    }
    // Inside this repository's target/ (the wheel, built in place): a stable directory, so that
    // rebuilds are incremental; else (cargo install) beside OUT_DIR.
    let nested = if own_target {
        root.join("target/embed")
    } else {
        out.join("embed-target")
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&nested)
        .args(["-p", "cudablame-preload", "--lib"]);
    if with_fake {
        cmd.args(["-p", "fake-cuda"]);
    }
    if std::env::var("CARGO_CFG_TARGET_ARCH").ok().as_deref() != Some(std::env::consts::ARCH) {
        // Cross builds would need the target triple; not supported.
        println!("cargo:warning=cross build: libcudablame.so is not embedded");
        write(&out.join("embedded.rs"), empty);
        return;
    }
    cmd.env("CUDABLAME_EMBED_INNER", "1")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        // Debug info only makes the command bigger: unwinding uses .eh_frame.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0");
    let status = cmd
        .status()
        .expect("cannot run cargo for the embedded libraries");
    assert!(
        status.success(),
        "building libcudablame.so to embed failed ({status})"
    );
    let release = nested.join("release");
    let lib = release.join("libcudablame.so");
    let fake = release.join("libfakecuda.so");
    let lib_bytes = std::fs::read(&lib).expect("read the built libcudablame.so");
    let fake_bytes = if with_fake {
        std::fs::read(&fake).expect("read the built libfakecuda.so")
    } else {
        Vec::new()
    };
    // FNV-1a over both: the cache directory name, so a new build never reuses an old extraction.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lib_bytes.iter().chain(fake_bytes.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let fake_line = if with_fake {
        format!(
            "pub const FAKE: &[u8] = include_bytes!({:?});\n",
            fake.display().to_string()
        )
    } else {
        "pub const FAKE: &[u8] = &[];\n".to_string()
    };
    write(
        &out.join("embedded.rs"),
        &format!(
            "pub const LIB: &[u8] = include_bytes!({:?});\n{fake_line}pub const HASH: &str = \"{h:016x}\";\n",
            lib.display().to_string()
        ),
    );
}

fn write(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).expect("write embedded.rs");
    }
}
