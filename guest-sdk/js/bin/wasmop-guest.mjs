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
    // Write then rename, so a host watching the output never reads a half-written component.
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(`${out}.tmp`, component);
    renameSync(`${out}.tmp`, out);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const [command, ...args] = process.argv.slice(2);
const outFlag = args.indexOf("--out");
const out = outFlag < 0 ? undefined : args.splice(outFlag, 2)[1];
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
  default:
    fail("usage: wasmop-guest sdk | check [dir] | test [dir] | build [dir] [--out file.wasm]");
}
