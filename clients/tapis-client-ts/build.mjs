// Build the package: generate the TypeScript of the contract (buf + protoc-gen-es) into src/gen,
// then compile src/, test/ and examples/ into dist/. `node build.mjs gen` only generates.
// buf: $BUF, else the project's virtualenv (`make setup` installs it).
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const buf = process.env.BUF ?? resolve(here, "../../.venv/bin/buf");

rmSync(join(here, "src/gen"), { recursive: true, force: true });
execFileSync(buf, ["generate"], { cwd: here, stdio: "inherit" });
if (process.argv[2] === "gen") process.exit(0);

rmSync(join(here, "dist"), { recursive: true, force: true });
execFileSync(process.execPath, [join(here, "node_modules/typescript/bin/tsc"), "-p", here], {
  cwd: here,
  stdio: "inherit",
});
