//! Embeds `libcudablame.so` and the simulated driver (`libfakecuda.so`) into every build of the
//! `cudablame` command, so that the command works wherever it is copied or installed
//! (`cargo install --path crates/cli`, a pip wheel): `src/locate.rs` writes the embedded copy on
//! first use to `$XDG_CACHE_HOME/cudablame/<version>-<hash>/` when no library is found beside the
//! command.
//!
//! Why always, with no switch: `cargo install --path crates/cli` builds in the workspace's own
//! `target/` with the same profile, environment and build-script outputs as `cargo build
//! --release` (measured: a build script sees identical variables, and cargo reuses the earlier
//! run), so a build script cannot tell an install from a workspace build. An earlier version
//! guessed from the target directory and gave `cargo install` a command without its library.
//!
//! Cargo cannot make a binary depend on its own workspace's cdylib (artifact dependencies are
//! unstable), and the command must not link the library (it would export `dlsym` into itself),
//! so this script builds the two libraries with a nested `cargo build` into a separate target
//! directory: `target/embed/` inside this repository (incremental, shared by the workspace build
//! and `cargo install --path`), else beside `OUT_DIR`. The nested build sets
//! `CUDABLAME_EMBED_INNER` (an internal marker between this script and itself, never read by the
//! library or the command) so that the command's own build script is not run again inside it.
//! The price: a fresh workspace build compiles the library twice (`target/release/` and
//! `target/embed/`); later builds are incremental in both.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let empty =
        "pub const LIB: &[u8] = &[];\npub const FAKE: &[u8] = &[];\npub const HASH: &str = \"\";\n";
    if std::env::var_os("CUDABLAME_EMBED_INNER").is_some() {
        write(&out.join("embedded.rs"), empty);
        return;
    }
    // The workspace root (this crate is crates/cli): the preload library is its root package.
    let in_workspace = std::fs::read_to_string(manifest.join("../../Cargo.toml"))
        .is_ok_and(|m| m.contains("name = \"cudablame-preload\""))
        && manifest.join("../../src/lib.rs").is_file();
    let root = if in_workspace {
        manifest.join("../..")
    } else {
        // The packaged crate (`cargo package --workspace`, then `cargo install` of the .crate, or
        // a registry): no workspace beside it. A generated package in OUT_DIR names the preload
        // library and the simulated driver as registry dependencies of this crate's version,
        // found where cargo finds this crate's own dependencies (a registry, or the
        // `[patch.crates-io]` of the installer's cargo configuration: README, Install); the
        // nested build below builds just those two packages. Not a code dependency of this crate.
        let version = std::env::var("CARGO_PKG_VERSION").expect("version");
        let gen = out.join("embed-src");
        std::fs::create_dir_all(&gen).expect("make embed-src");
        write(
            &gen.join("Cargo.toml"),
            &format!(
                "[package]\nname = \"cudablame-embed\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\
                 [lib]\npath = \"lib.rs\"\n[dependencies]\ncudablame-preload = \"={version}\"\nfake-cuda = \"={version}\"\n\
                 [workspace]\n"
            ),
        );
        write(&gen.join("lib.rs"), "");
        gen
    };
    // OUT_DIR = <target>/<profile>/build/<package>-<hash>/out
    let target_dir = out.ancestors().nth(4).map(Path::to_path_buf);
    let own_target = in_workspace
        && target_dir
            .as_deref()
            .zip(root.join("target").canonicalize().ok())
            .is_some_and(|(t, m)| t.canonicalize().is_ok_and(|t| t == m));
    let fake_dir = root.join("shim-tests/fake-driver");
    let with_fake = !in_workspace || fake_dir.join("Cargo.toml").is_file();
    if in_workspace {
        println!("cargo:rerun-if-changed={}", fake_dir.display());
    }
    // Inside this repository's target/ (workspace builds, `cargo install --path`, the wheel): a
    // stable directory, so that rebuilds are incremental; else beside OUT_DIR.
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
