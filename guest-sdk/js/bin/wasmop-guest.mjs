#!/usr/bin/env node
// The TypeScript plugin toolchain of @wasmop/guest: type-checks, tests and builds plugins with
// the pinned typescript, esbuild and componentize-js this package was installed with.
//
//   wasmop-guest sdk                      build this package: dist/ (tsc) and dist/wit/ (the WIT, its deps)
//   wasmop-guest check [dir]              tsc --noEmit -p dir
//   wasmop-guest test [dir]               bundle every *.test.ts under dir with esbuild, run node --test in dir
//   wasmop-guest build [dir] --out FILE   bundle dir/plugin.ts into a wasmop:plugin component of
//                                         the operator world (reconciler and admission), or of
//                                         operator-http (with wasi:http) when it grants http
//   wasmop-guest dev-runtime --out FILE [--http]
//                                         build the dev runtime: a component that runs the bundle
//                                         /plugin/plugin.js it reads at run time (wasmop run
//                                         --dev-source), with wasi:http for --http
//   wasmop-guest dev [dir] --out DIR      bundle dir/plugin.ts into DIR/plugin.js for the dev
//                                         runtime, again on every change, until stopped
//
// dir defaults to the current directory. A plugin directory holds plugin.ts, whose default export
// is the Reconciler, and resolves @wasmop/guest from its node_modules.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const SDK = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(SDK, "package.json"));
const WIT = join(SDK, "dist", "wit");
const HOST_IMPORT = "wasmop:plugin/host@0.8.1";
// The wasi:http imports of the HTTP client, in the world of a plugin that declares an http grant.
const HTTP_IMPORTS = ["wasi:http/outgoing-handler@0.2.12", "wasi:http/types@0.2.12"];
// No built-in fetch: it returns a promise no synchronous export can wait for, and the host links
// wasi:http only for plugins granted HTTP, refusing others that import it; the SDK's client binds
// the imports itself.
const DISABLED_FEATURES = ["http", "fetch-event"];

/** Writes `component` to `out`, beside then renamed, so a host watching `out` never reads half of it. */
function writeComponent(out, component) {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(`${out}.tmp`, component);
  renameSync(`${out}.tmp`, out);
}

function fail(message) {
  console.error(`wasmop-guest: ${message}`);
  process.exit(1);
}

function run(command, args, cwd = undefined) {
  const result = spawnSync(command, args, { stdio: "inherit", cwd });
  if (result.error) fail(`${command}: ${result.error.message}`);
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function tsc(args) {
  run(process.execPath, [require.resolve("typescript/bin/tsc"), ...args]);
}

/** Files under `dir` whose names end in `suffix`, skipping node_modules, dist and dot directories. */
function find(dir, suffix) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      return entry.name === "node_modules" || entry.name === "dist" || entry.name.startsWith(".") ? [] : find(path, suffix);
    }
    return entry.name.endsWith(suffix) ? [path] : [];
  });
}

function sdk() {
  rmSync(join(SDK, "dist"), { recursive: true, force: true });
  tsc(["-p", join(SDK, "tsconfig.build.json")]);
  cpSync(join(SDK, "..", "..", "wit"), WIT, { recursive: true });
}

async function test(dir) {
  const tests = find(dir, ".test.ts");
  if (tests.length === 0) fail(`no *.test.ts under ${dir}`);
  const { build } = await import("esbuild");
  const out = mkdtempSync(join(tmpdir(), "wasmop-guest-test-"));
  try {
    await build({
      entryPoints: tests.map((path) => ({ in: path, out: relative(dir, path).replace(/\.test\.ts$/, ".test") })),
      outdir: out,
      outExtension: { ".js": ".mjs" },
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      sourcemap: "inline",
      logLevel: "warning",
    });
    // From the plugin's directory, as `npm test` runs: a test's relative paths are the plugin's.
    run(process.execPath, ["--enable-source-maps", "--test", "--test-reporter=spec", ...find(out, ".test.mjs")], dir);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** Whether the plugin in `dir` declares an http grant: its config, run in Node. */
async function grantsHttp(build, dir, work) {
  const probe = join(work, "probe.mjs");
  await build({
    entryPoints: [join(dir, "plugin.ts")],
    outfile: probe,
    bundle: true,
    platform: "node",
    format: "esm",
    logLevel: "warning",
  });
  const { default: plugin } = await import(probe);
  return plugin.config().httpGrant !== undefined;
}

async function buildPlugin(dir, out) {
  if (!existsSync(join(dir, "plugin.ts"))) fail(`${dir} has no plugin.ts`);
  if (!existsSync(join(WIT, "plugin.wit"))) fail(`${WIT} is missing: build the SDK first (wasmop-guest sdk)`);
  const { build } = await import("esbuild");
  const { componentize } = await import("@bytecodealliance/componentize-js");
  const work = mkdtempSync(join(tmpdir(), "wasmop-guest-build-"));
  try {
    const http = await grantsHttp(build, dir, work);
    const bundle = join(work, "plugin.js");
    await build({
      stdin: {
        contents: [
          `import * as host from "${HOST_IMPORT}";`,
          ...(http ? [`import * as handler from "${HTTP_IMPORTS[0]}";`, `import * as types from "${HTTP_IMPORTS[1]}";`] : []),
          `import { exportAdmission, exportHttp, exportReconciler } from "@wasmop/guest/component";`,
          `import plugin from "./plugin.ts";`,
          `exportHttp(${http ? "{ handler, types }" : ""});`,
          `export const reconciler = exportReconciler(plugin, host);`,
          `export const admission = exportAdmission(plugin, host);`,
        ].join("\n"),
        resolveDir: dir,
        sourcefile: "entry.ts",
        loader: "ts",
      },
      outfile: bundle,
      bundle: true,
      platform: "neutral",
      format: "esm",
      target: "es2022",
      external: [HOST_IMPORT, ...HTTP_IMPORTS],
      logLevel: "warning",
    });
    const { component } = await componentize({
      sourcePath: bundle,
      witPath: WIT,
      worldName: http ? "operator-http" : "operator",
      disableFeatures: DISABLED_FEATURES,
    });
    writeComponent(out, component);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// The dev runtime's world: a plugin's, and the preopened directory it reads the plugin from; in
// the contract's package, of the version the host import names.
const DEV_WIT = (world) => `package wasmop:plugin@${HOST_IMPORT.split("@")[1]};

world ${world}-dev {
    include ${world};
    import wasi:filesystem/preopens@0.2.12;
    import wasi:filesystem/types@0.2.12;
}
`;

// The names of the exports' functions, which the dev runtime forwards to the plugin's.
const RECONCILER_FUNCTIONS = ["describe", "desired", "reconcile", "cleanup", "check", "updateErrorStatus", "mapSecondary",
  "secondariesOf", "crd", "fetch", "fetchAll", "applyExternal", "deleteExternal", "mapInbound", "filter"];
const ADMISSION_FUNCTIONS = ["validate", "default", "convert"];

/** Builds the dev runtime: the SDK and a loader of `/plugin/plugin.js`, no plugin. */
async function buildDevRuntime(out, http) {
  if (!existsSync(join(WIT, "plugin.wit"))) fail(`${WIT} is missing: build the SDK first (wasmop-guest sdk)`);
  const { build } = await import("esbuild");
  const { componentize } = await import("@bytecodealliance/componentize-js");
  const work = mkdtempSync(join(tmpdir(), "wasmop-guest-dev-runtime-"));
  try {
    const world = http ? "operator-http" : "operator";
    cpSync(WIT, join(work, "wit"), { recursive: true });
    writeFileSync(join(work, "wit", "dev.wit"), DEV_WIT(world));
    const forward = (name, functions) =>
      `export const ${name} = { ${functions.map((f) => `${f}: (...args) => load().${name}.${f}(...args)`).join(", ")} };`;
    const bundle = join(work, "runtime.js");
    await build({
      stdin: {
        contents: [
          `import * as host from "${HOST_IMPORT}";`,
          ...(http ? [`import * as handler from "${HTTP_IMPORTS[0]}";`, `import * as types from "${HTTP_IMPORTS[1]}";`] : []),
          `import { getDirectories } from "wasi:filesystem/preopens@0.2.12";`,
          `import * as guest from "@wasmop/guest";`,
          `import { exportAdmission, exportHttp, exportReconciler } from "@wasmop/guest/component";`,
          `exportHttp(${http ? "{ handler, types }" : ""});`,
          `let loaded;`,
          `function load() {`,
          `  if (loaded) return loaded;`,
          `  const dir = getDirectories().find(([, path]) => path === "/plugin");`,
          `  if (!dir) throw new Error("the wasmop dev runtime runs only under \`wasmop run --dev-source\`: no /plugin");`,
          `  const file = dir[0].openAt({}, "plugin.js", {}, { read: true });`,
          `  const [bytes] = file.read(file.stat().size, 0n);`,
          `  const module = { exports: {} };`,
          `  const require = (name) => {`,
          `    if (name === "@wasmop/guest") return guest;`,
          `    throw new Error(\`the wasmop dev runtime holds only @wasmop/guest, not \${name}\`);`,
          `  };`,
          `  new Function("require", "module", "exports", new TextDecoder().decode(bytes))(require, module, module.exports);`,
          `  const plugin = module.exports.default;`,
          `  loaded = { reconciler: exportReconciler(plugin, host), admission: exportAdmission(plugin, host) };`,
          `  return loaded;`,
          `}`,
          forward("reconciler", RECONCILER_FUNCTIONS),
          forward("admission", ADMISSION_FUNCTIONS),
        ].join("\n"),
        resolveDir: SDK,
        sourcefile: "dev-runtime.js",
        loader: "js",
      },
      outfile: bundle,
      bundle: true,
      platform: "neutral",
      format: "esm",
      target: "es2022",
      external: [HOST_IMPORT, ...HTTP_IMPORTS, "wasi:filesystem/preopens@0.2.12"],
      logLevel: "warning",
    });
    const { component } = await componentize({
      sourcePath: bundle,
      witPath: join(work, "wit"),
      worldName: `${world}-dev`,
      disableFeatures: DISABLED_FEATURES,
    });
    writeComponent(out, component);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Bundles `dir`/plugin.ts into `out`/plugin.js for the dev runtime, again on every change. */
async function dev(dir, out) {
  if (!existsSync(join(dir, "plugin.ts"))) fail(`${dir} has no plugin.ts`);
  const { context } = await import("esbuild");
  mkdirSync(out, { recursive: true });
  const built = {
    name: "wasmop-dev",
    setup(build) {
      build.onEnd((result) => {
        if (result.errors.length === 0) console.error(`wasmop-guest: ${join(out, "plugin.js")} written`);
      });
    },
  };
  const bundler = await context({
    entryPoints: [join(dir, "plugin.ts")],
    outfile: join(out, "plugin.js"),
    bundle: true,
    platform: "neutral",
    format: "cjs",
    target: "es2022",
    // The runtime's own SDK: the plugin's values are the classes the runtime checks for.
    external: ["@wasmop/guest"],
    logLevel: "warning",
    plugins: [built],
  });
  await bundler.watch();
}

const [command, ...args] = process.argv.slice(2);
const outFlag = args.indexOf("--out");
const out = outFlag < 0 ? undefined : args.splice(outFlag, 2)[1];
const httpFlag = args.indexOf("--http");
if (httpFlag >= 0) args.splice(httpFlag, 1);
const dir = resolve(args[0] ?? ".");
switch (command) {
  case "sdk":
    sdk();
    break;
  case "check":
    tsc(["--noEmit", "-p", dir]);
    break;
  case "test":
    await test(dir);
    break;
  case "build":
    await buildPlugin(dir, resolve(out ?? join(dir, "dist", `${basename(dir)}.wasm`)));
    break;
  case "dev-runtime":
    if (!out) fail("dev-runtime needs --out FILE.wasm");
    await buildDevRuntime(resolve(out), httpFlag >= 0);
    break;
  case "dev":
    await dev(dir, resolve(out ?? join(dir, "dist", "dev")));
    break;
  default:
    fail("usage: wasmop-guest sdk | check [dir] | test [dir] | build [dir] [--out file.wasm] | dev-runtime --out file.wasm [--http] | dev [dir] [--out dir]");
}
