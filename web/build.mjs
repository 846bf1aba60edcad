// Build the web client into its package, clients/tapis_webclient/static (or into the folder
// given): bundle with esbuild, copy the page and its style. The envelope client and the
// contract's TypeScript come from the package @tapis/client (clients/tapis-client-ts, a local
// dependency: `make web` builds it first). `node build.mjs gen` only generates the contract's
// TypeScript into src/gen (buf + protoc-gen-es), for bench/peers/load.ts.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));

if (process.argv[2] === "gen") {
  const buf = process.env.BUF ?? resolve(here, "../.venv/bin/buf");
  rmSync(join(here, "src/gen"), { recursive: true, force: true });
  execFileSync(buf, ["generate"], { cwd: here, stdio: "inherit" });
  process.exit(0);
}

if (!existsSync(join(here, "node_modules/@tapis/client/dist/src/browser.js"))) {
  console.error("@tapis/client is not built: run `make web` (it builds clients/tapis-client-ts first)");
  process.exit(1);
}

/** One copy of protobuf-es in the bundle: the package's imports of it resolve to the web's. */
const oneProtobuf = {
  name: "one-protobuf",
  setup(builder) {
    builder.onResolve({ filter: /^@bufbuild\/protobuf(\/.*)?$/ }, (args) =>
      args.pluginData === "one-protobuf" ? undefined
        : builder.resolve(args.path, { kind: args.kind, resolveDir: here, pluginData: "one-protobuf" }));
  },
};

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
  plugins: [oneProtobuf],
});
copyFileSync(join(here, "src/index.html"), join(out, "index.html"));
copyFileSync(join(here, "src/app.css"), join(out, "app.css"));
