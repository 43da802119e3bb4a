// Package conformance replays recorded wire fixtures against a running Hermes build, one
// driver per transport, and compares what comes back with what was recorded.
//
// # Fixture format
//
// A fixture is a txtar archive in testdata/ (the comment before the first file describes it):
//
//	-- meta.json --       {"transports": ["gateway-stdio", "http"], "ignore": ["status.update"], "config": "…yaml…", "remote": false}
//	-- model.json --      the scripted model, turn by turn: [{"text": [...], "calls": [{"name", "args"}]}]
//	-- cassette.json --   model.json recorded on the OpenAI wire (-update writes it)
//	-- policy.js --       optional policy script (or policy.lua)
//	-- files/NAME --      optional files laid out in the working directory (a script for cli)
//	-- client.jsonl --    the script: one step per line (client/<transport>.jsonl overrides it)
//	-- want/<transport>.jsonl --   the expected server frames, written only by -update
//
// A step is a JSON object: {"send": <frame>} writes a client frame and reads until its reply;
// {"send": …, "until": "message.complete"} reads on until an event (or server→client request)
// of that name; {"raw": "text"} sends bytes that need not be JSON and reads the reply;
// {"until": "…"} only reads; {"answer": "$request1", "result": {…}} answers a server→client
// request; {"await": 4} reads until the reply to request 4; {"close": true} ends the
// connection and {"reconnect": true} opens a new one: to the same server on WebSocket and
// HTTP, and on stdio a new process on the same home (so a fixture shows what persists).
// {"controller": {"capabilities": […]}} registers and connects a browser controller with the
// server's key (gateway-ws), which answers each command with the action and arguments it got.
// meta.remote marks fixtures that need no model, policy or configuration of their own.
//
// # Transports and dialects
//
// gateway-stdio, gateway-ws and acp-stdio speak JSON-RPC: a reply carries its request's id,
// events are notifications (the gateway's "event" by params.type, ACP's session/update by
// update.sessionUpdate, any other by method). http starts `hermes serve` and sends requests
// {"method", "path", "headers", "body"}; a response is one frame {"status", "headers" (only
// content-type, X-Hermes-*, Idempotency-Replayed, Retry-After), "body"}, and each event of an
// event stream is a frame {"event", "id", "data"} named by its event field or data.event,
// data.type, data.object (or the data itself: "[DONE]"). Responses come before stream events
// that arrived meanwhile, and one stream is read at a time, so the order is deterministic. cli
// runs the build as a command per step, {"args", "env", "stdin"}: each JSON line on stdout is
// a frame (`hermes run --json` prints engine events) and {"exit", "stderr"} ends the step. A
// Driver brings its rules as a Dialect; the runner knows no transport.
//
// # Normalisation and captures
//
// Frames are compared as JSON with keys sorted. Values that differ between runs are replaced by
// placeholders in order of first appearance: session ids ($session1…), server request ids
// ($request1…), tool call ids ($tool1…), row ids ($row1…), run, turn and admission ids, other
// generated ids by their prefix ($chatcmpl1, $resp1, $msg1), task ids, epochs and
// generations, and timestamps and durations ($time, $duration). A captured id that appears
// inside free text is replaced too, and so is the fixture's directory ($dir). Event seq
// numbers are rebased per session (the first seq seen becomes 1). Client frames may use the
// placeholders, also inside a string ("/v1/runs/$run1/events", "replay:$dir/cassette.json"):
// the value captured earlier is substituted before sending. Events whose type is in
// meta.ignore are dropped before comparing (they carry timing, not contract), and so is
// tool.progress always.
//
// # Fixtures
//
// The behaviours are those numbered in the protocol reference's conformance list.
//
//	gateway_errors                 1-4   ready frame first, parse error, unknown method, bad params, unknown key, unknown session (remote)
//	gateway_turn                   5-7   lazy create, streaming reply, one message.complete, tool start/complete pairs
//	behaviour_08_busy_interrupt    8     busy mode interrupt: queued reply, first turn interrupted, queued text runs next
//	behaviour_09_busy_queue        9     busy mode queue: two prompts queued, one follow-up turn with both texts
//	behaviour_10_busy_steer        10    busy mode steer: steered reply, text delivered with the next tool result
//	behaviour_11_interrupt_queued  11    interrupt discards the queued prompt, cancels the approval, other session untouched
//	gateway_rewind                 12-15 rewind refusals (4029, 4004, 4018, 4030, 4028) and a confirmed rewind
//	behaviour_16_17_busy_refusals  16-17 rewind, /undo, compress and a model change refused with 4009 while running
//	gateway_steer_since            18,21 session.steer and session.events.since
//	gateway_ws_gate                19    no approval frame to a client without server_requests
//	gateway_command_dispatch       i17.7 command.dispatch {"command": "/model …"} beside {name, arg}
//	gateway_reconnect              20,22 an open request survives a reconnect and is answered from the new connection
//	gateway_ws_browser             i17.9 a prompt.submit over /api/ws drives the controller its key registered
//	gateway_live_events            i17.8 usage ticks, sub-agent lifecycle, background process output, a failed turn kept as inflight with its corrections
//	gateway_display                i17.8 the display section's busy_input_mode loads (queue); a display_kind hidden prompt is marked hidden in session.history
//	acp_turn                       23,26 ACP initialize, streaming prompt, permission request
//	behaviour_24_acp_load          24    session/load in a new process replays the history (tool calls, plan) before its response
//	behaviour_25_acp_queue_cancel  25    a second prompt is queued at once; session/cancel ends the first cancelled
//	behaviour_25_acp_queued_turn   25    the queued prompt runs next, announced by a user_message_chunk
//	acp_terminal_exit              i17.13 a terminal command exiting non-zero is failed, live and on session/load
//	acp_commands                   i17.12 slash commands answered locally, available_commands_update, usage_update, automatic title, list
//	acp_headless                   i17    one process per command on one home: new, then resume + prompt, then list
//	acp_clarify                    i17.11 clarify with choices as a permission request; a free-text one withdrawn at once, clarify hidden
//	acp_elicit                     i17.11 a free-text clarify question as an elicitation form to a client that renders forms: accepted, declined
//	acp_edit_review                i17.13 edits shown as a diff and approved before they are written; denied, nothing written; allow_session remembered
//	gateway_approval               26    the gateway twin of the approval round trip
//	behaviour_27_auth              27    /health open, 401 without or with a wrong key (remote); a short key refuses to start (cli)
//	behaviour_28_chat_stream       28    streamed chat completion: role chunk, tool progress, finish, usage, [DONE]
//	behaviour_29_responses_chain   29    previous_response_id chains; unknown id and conversation conflicts refused
//	behaviour_30_run_approval      30    run admission, waiting_for_approval, approval and steer refusals, completion
//	behaviour_30_run_steer         30    steer while running is accepted and delivered with the tool result; blank is 400
//	behaviour_30_run_stop_budget   30    stop while waiting ends cancelled; the iteration budget ends failed
//	policy_allow, policy_deny,     cross-surface policy: one policy script allows, denies or asks for the same
//	policy_ask                     tool call identically on gateway-stdio, gateway-ws, acp-stdio, http runs and cli
//	provider_model_catalogue       model catalogue: names of another provider refused -32602 with suggestions, the rest accepted
//	provider_anthropic_turn        a tool round trip on the Anthropic wire (SDK-recorded cassette) on the gateway, ACP and an HTTP run
//	long_session_compacting        i21   context fields and the compacting status on the gateway, ACP, HTTP runs and a chat stream (10000-token window)
//
// # Running
//
// `go test ./conformance/...` builds hermes (or uses HERMES_CONFORMANCE_BINARY) and replays
// every fixture on every transport it names; `go test ./conformance/... -update` re-records
// want/ (and cassettes whose model.json changed) from the current build; with -run it rewrites
// only the fixtures selected. `hermes conformance --target BINARY|URL` replays the shipped
// fixtures against another build, or against a running server (http:// for the HTTP API,
// ws://…/api/ws for the gateway; only remote fixtures), and prints a pass/fail table.
package conformance
