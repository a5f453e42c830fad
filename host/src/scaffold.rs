//! `wasmop new`: a plugin, in Rust, Python, TypeScript or Go, that builds for wasm32-wasip2 and
//! passes its test as generated. Pure: renders the files; the CLI writes them.

use std::path::{Path, PathBuf};

/// The language of a scaffolded plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Lang {
    /// A crate on the Rust SDK (`guest-sdk`), built with cargo.
    #[default]
    Rust,
    /// A module on the Python SDK (`guest-sdk/python`), built with componentize-py.
    Python,
    /// A TypeScript module on the TypeScript SDK (`guest-sdk/js`), built with componentize-js.
    Ts,
    /// A Go module on the Go SDK (`guest-sdk/go`), built with standard Go and wasmop-componentize.
    Go,
}

impl Lang {
    /// Where this language's SDK lies in the repository.
    fn sdk_dir(self) -> &'static str {
        match self {
            Lang::Rust => "guest-sdk",
            Lang::Python => "guest-sdk/python",
            Lang::Ts => "guest-sdk/js",
            Lang::Go => "guest-sdk/go",
        }
    }

    /// How to test and build what was scaffolded, in one line.
    pub fn next_steps(self) -> &'static str {
        match self {
            Lang::Rust => "`cargo test` and `cargo build --release --target wasm32-wasip2` there",
            Lang::Python | Lang::Ts | Lang::Go => "README.md there says how to test and build it",
        }
    }
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct Scaffold {
    /// The crate and plugin name, e.g. `hello-op`.
    pub name: String,
    /// The primary's API group, e.g. `demo.example.com`.
    pub group: String,
    /// The primary's kind, e.g. `Hello`.
    pub kind: String,
    /// How the plugin depends on the SDK: a path to its directory, or none for the published
    /// package.
    pub sdk: Option<PathBuf>,
    /// Its language.
    pub lang: Lang,
}

/// A name, group or kind `wasmop new` cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScaffoldError {
    /// Not a crate name of lower-case letters, digits and dashes.
    #[error("{0:?} is not a plugin name: use lower-case letters, digits and dashes, starting with a letter")]
    Name(String),
    /// Not a DNS subdomain with a dot.
    #[error("{0:?} is not an API group: use a DNS name such as demo.example.com")]
    Group(String),
    /// Not an upper camel case identifier.
    #[error("{0:?} is not a kind: use an UpperCamelCase name such as Greeting")]
    Kind(String),
}

/// The SDK of `lang` this binary was built with, when its sources are still there.
pub fn local_sdk(lang: Lang) -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(lang.sdk_dir());
    sdk.is_dir().then(|| sdk.canonicalize().unwrap_or(sdk))
}

impl Scaffold {
    /// The files of the crate, by path relative to its directory.
    pub fn files(&self) -> Result<Vec<(&'static str, String)>, ScaffoldError> {
        let name_ok = self.name.starts_with(|c: char| c.is_ascii_lowercase())
            && self.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(ScaffoldError::Name(self.name.clone()));
        }
        let group_ok = self.group.contains('.')
            && self
                .group
                .split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
        if !group_ok {
            return Err(ScaffoldError::Group(self.group.clone()));
        }
        let kind_ok = self.kind.starts_with(|c: char| c.is_ascii_uppercase())
            && self.kind.chars().all(|c| c.is_ascii_alphanumeric());
        if !kind_ok {
            return Err(ScaffoldError::Kind(self.kind.clone()));
        }
        let singular = self.kind.to_ascii_lowercase();
        let sdk = match (&self.sdk, self.lang) {
            (Some(path), Lang::Rust) => format!("{{ path = {:?} }}", path.display().to_string()),
            (None, Lang::Rust) => format!("\"{}\"", env!("CARGO_PKG_VERSION")),
            (Some(path), _) => path.display().to_string(),
            (None, _) => self.lang.sdk_dir().to_string(),
        };
        let render = |template: &str| {
            template
                .replace("{{name}}", &self.name)
                .replace("{{crate}}", &self.name.replace('-', "_"))
                .replace("{{channel}}", toolchain_channel())
                .replace("{{wasmop_version}}", env!("CARGO_PKG_VERSION"))
                .replace("{{group}}", &self.group)
                .replace("{{kind}}", &self.kind)
                .replace("{{plural}}", &format!("{singular}s"))
                .replace("{{singular}}", &singular)
                .replace("{{sdk}}", &sdk)
        };
        let templates: &[(&'static str, &str)] = match self.lang {
            Lang::Rust => &[
                ("Cargo.toml", include_str!("../templates/new/Cargo.toml.tmpl")),
                ("rust-toolchain.toml", include_str!("../templates/new/rust-toolchain.toml.tmpl")),
                ("src/lib.rs", include_str!("../templates/new/lib.rs.tmpl")),
                ("crd.yaml", include_str!("../templates/new/crd.yaml.tmpl")),
                ("example.yaml", include_str!("../templates/new/example.yaml.tmpl")),
            ],
            Lang::Python => &[
                ("app.py", include_str!("../templates/new-python/app.py.tmpl")),
                ("test_app.py", include_str!("../templates/new-python/test_app.py.tmpl")),
                ("README.md", include_str!("../templates/new-python/BUILD.md")),
                ("crd.yaml", include_str!("../templates/new-python/crd.yaml.tmpl")),
                ("example.yaml", include_str!("../templates/new-python/example.yaml.tmpl")),
            ],
            Lang::Ts => &[
                ("plugin.ts", include_str!("../templates/new-ts/plugin.ts.tmpl")),
                ("plugin.test.ts", include_str!("../templates/new-ts/plugin.test.ts.tmpl")),
                ("package.json", include_str!("../templates/new-ts/package.json.tmpl")),
                ("tsconfig.json", include_str!("../templates/new-ts/tsconfig.json.tmpl")),
                (".gitignore", include_str!("../templates/new-ts/gitignore.tmpl")),
                ("README.md", include_str!("../templates/new-ts/README.md.tmpl")),
                ("crd.yaml", include_str!("../templates/new-ts/crd.yaml.tmpl")),
                ("example.yaml", include_str!("../templates/new-ts/example.yaml.tmpl")),
            ],
            Lang::Go => &[
                ("main.go", include_str!("../templates/new-go/main.go.tmpl")),
                ("main_test.go", include_str!("../templates/new-go/main_test.go.tmpl")),
                ("go.mod", include_str!("../templates/new-go/go.mod.tmpl")),
                ("README.md", include_str!("../templates/new-go/README.md.tmpl")),
                ("crd.yaml", include_str!("../templates/new-go/crd.yaml.tmpl")),
                ("example.yaml", include_str!("../templates/new-go/example.yaml.tmpl")),
            ],
        };
        Ok(templates.iter().map(|(path, template)| (*path, render(template))).collect())
    }
}

/// The toolchain channel of the repository's `rust-toolchain.toml`: the one the host and the SDK
/// are built and tested with.
fn toolchain_channel() -> &'static str {
    include_str!("../../rust-toolchain.toml")
        .lines()
        .find_map(|line| line.strip_prefix("channel = "))
        .map(|channel| channel.trim_matches('"'))
        .expect("rust-toolchain.toml names a channel")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaffold(name: &str, group: &str, kind: &str) -> Scaffold {
        Scaffold {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            sdk: Some("/sdk".into()),
            lang: Lang::Rust,
        }
    }

    #[test]
    fn renders_every_file_with_the_names_given() {
        let files = scaffold("hello-op", "demo.example.com", "Hello").files().unwrap();
        let file = |path: &str| &files.iter().find(|(p, _)| *p == path).unwrap().1;
        assert!(file("Cargo.toml").contains("name = \"hello-op\""));
        assert!(file("Cargo.toml").contains("wasmop-guest = { path = \"/sdk\" }"));
        assert!(file("src/lib.rs").contains("pub struct HelloReconciler;"));
        assert!(
            file("src/lib.rs").contains("Kind::namespaced(\"demo.example.com\", \"v1\", \"Hello\").plural(\"hellos\")")
        );
        assert!(file("crd.yaml").contains("name: hellos.demo.example.com"));
        assert!(file("example.yaml").contains("apiVersion: demo.example.com/v1"));
        assert!(file("src/lib.rs").contains("Crd::of::<Spec, Status>"), "the CRD comes from the types");
        assert!(file("src/lib.rs").contains("release/hello_op.wasm > crd.yaml"));
        assert!(files.iter().all(|(_, text)| !text.contains("{{")), "every placeholder is filled");
    }

    #[test]
    fn every_language_scaffolds_a_validating_webhook_and_its_test() {
        for (lang, plugin, test, handler) in [
            (Lang::Rust, "src/lib.rs", "src/lib.rs", "impl Validator for HelloReconciler"),
            (Lang::Python, "app.py", "test_app.py", "def validate(self, request: AdmissionRequest"),
            (Lang::Ts, "plugin.ts", "plugin.test.ts", "validate(request) {"),
            (Lang::Go, "main.go", "main_test.go", "func (Reconciler) Validate("),
        ] {
            let files = Scaffold { lang, ..scaffold("hello-op", "demo.example.com", "Hello") }.files().unwrap();
            let file = |path: &str| &files.iter().find(|(p, _)| *p == path).unwrap().1;
            let declared = [
                ".webhook(Webhook::validating())",
                ".webhook(Webhook.validating())",
                "Webhook(wasmop.ValidatingWebhook())",
            ];
            assert!(declared.iter().any(|d| file(plugin).contains(d)), "{lang:?} declares the webhook");
            assert!(file(plugin).contains(handler), "{lang:?} implements it");
            let at = [r#".at("spec.message")"#, r#".At("spec.message")"#];
            assert!(at.iter().any(|a| file(plugin).contains(a)), "{lang:?} names the field");
            assert!(file(test).contains("the message must not be empty"), "{lang:?} tests the refusal");
        }
    }

    #[test]
    fn pins_the_toolchain_the_repository_pins() {
        let files = scaffold("hello-op", "demo.example.com", "Hello").files().unwrap();
        let toolchain = &files.iter().find(|(p, _)| *p == "rust-toolchain.toml").expect("a rust-toolchain.toml").1;
        let root = include_str!("../../rust-toolchain.toml");
        let channel = root.lines().find(|l| l.starts_with("channel = ")).expect("the root pins a channel");
        assert!(toolchain.lines().any(|l| l == channel), "{toolchain}");
        assert!(toolchain.contains(r#"targets = ["wasm32-wasip2"]"#), "{toolchain}");
    }

    #[test]
    fn bad_names_are_refused_with_a_hint() {
        assert!(matches!(scaffold("Hello", "a.b", "K").files(), Err(ScaffoldError::Name(_))));
        assert!(matches!(scaffold("h", "nodot", "K").files(), Err(ScaffoldError::Group(_))));
        assert!(matches!(scaffold("h", "a.b", "lower").files(), Err(ScaffoldError::Kind(_))));
    }
}
