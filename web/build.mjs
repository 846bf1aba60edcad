// Build the web client into its package, clients/tapis_webclient/static (or into the folder given): generate the
// TypeScript of the contract (buf + protoc-gen-es), bundle with esbuild, copy the page and
// its style. `node build.mjs gen` only generates.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const buf = process.env.BUF ?? resolve(here, "../.venv/bin/buf");

rmSync(join(here, "src/gen"), { recursive: true, force: true });
execFileSync(buf, ["generate"], { cwd: here, stdio: "inherit" });
if (process.argv[2] === "gen") process.exit(0);

const out = resolve(process.argv[2] ?? join(here, "../clients/tapis_webclient/static"));
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(here, "src/main.ts")],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2020",
  legalComments: "none",
  outfile: join(out, "app.js"),
  logLevel: "warning",
});
copyFileSync(join(here, "src/index.html"), join(out, "index.html"));
copyFileSync(join(here, "src/app.css"), join(out, "app.css"));
