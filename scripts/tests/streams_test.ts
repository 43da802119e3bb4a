// Example suite in TypeScript: turns read as streams that end. Types come from
// scripts/types/hermes.d.ts; hermes strips them at load.
import * as hermes from "hermes";
import * as assert from "assert";

function types(events: Iterable<hermes.Event>): string[] {
  const out: string[] = [];
  for (const ev of events) out.push(ev.type);
  return out;
}

test("t.events() replays a finished turn", () => {
  const s: Session = hermes.create({ model: hermes.fake_model([{ text: "hello" }]) });
  const t: Turn = s.prompt("hi");
  const outcome: Outcome = t.wait();
  assert.equal(outcome.text, "hello");
  const seen = types(t.events());
  assert.equal(seen[seen.length - 1], "message.complete");
  assert.equal(types(t.events()), seen);
});

test("s.events({follow: false}) ends at what is stored", () => {
  const s = hermes.create({ model: hermes.fake_model([{ text: "one" }, { text: "two" }]) });
  s.run("1");
  s.run("2");
  const done = types(s.events({ since: 0, follow: false })).filter((x) => x === "message.complete");
  assert.equal(done.length, 2);
});
