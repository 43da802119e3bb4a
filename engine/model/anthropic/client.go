// Package anthropic is the model provider for Anthropic's Messages API, built on the official Go
// SDK (github.com/anthropics/anthropic-sdk-go). It maps the engine's provider-neutral requests
// onto the Messages wire (system blocks, tool_use and tool_result blocks, signed thinking
// blocks), places prompt-cache breakpoints, decodes the streamed events into engine chunks
// (text, extended thinking as reasoning, tool calls with their streamed input JSON, usage with
// cache reads and writes, the stop reason) and retries what is worth retrying. The SDK's own
// retries are switched off so that one policy, documented here, decides: a request is retried
// only while nothing of its answer has reached the caller.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/redact"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxRetries is the number of retries after the first attempt when Config.MaxRetries is
// zero, as in the official SDKs.
const DefaultMaxRetries = 2

// DefaultMaxTokens is max_tokens (required by the API) when neither the request nor the
// configuration sets one.
const DefaultMaxTokens = 8192

// Sentinel errors for failures that are not an API error envelope.
var (
	// ErrUnreachable wraps a transport failure before a response arrived.
	ErrUnreachable = model.ErrUnreachable
	// ErrIncompleteStream means the event stream ended before message_stop.
	ErrIncompleteStream = errors.New("stream ended before message_stop")
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root without the version segment (https://api.anthropic.com, or a
	// gateway or proxy); a trailing /v1 is tolerated. Empty means DefaultBaseURL.
	BaseURL string
	// APIKey is the API key; the SDK sends it as "Authorization: Bearer <key>".
	APIKey string
	// Headers are added to every request (anthropic-beta flags, a proxy's own key).
	Headers map[string]string
	// HTTPClient sends the requests; nil means http.DefaultClient. It is where a cassette
	// recorder or player plugs in.
	HTTPClient *http.Client
	// MaxRetries is the number of retries after the first attempt (0 means DefaultMaxRetries,
	// negative none).
	MaxRetries int
	// Backoff, when set, replaces the whole delay computation before retry number attempt
	// (1-based), Retry-After included; tests use it to avoid waiting.
	Backoff func(attempt int) time.Duration
	// MaxTokens is max_tokens when the request sets none (0 means DefaultMaxTokens).
	MaxTokens int
	// ThinkingBudget, when positive, enables extended thinking with that many budget tokens
	// (the API's minimum is 1024); max_tokens is raised above it when needed.
	ThinkingBudget int
}

// Client streams messages from one endpoint. It is safe for concurrent use.
type Client struct {
	sdk        sdk.Client
	urlErr     error
	maxRetries int
	backoff    func(int) time.Duration
	maxTokens  int
	thinking   int
}

var _ model.Provider = (*Client)(nil)

// New returns a client for cfg. The SDK's environment defaults (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, profiles) are not read here: configuration resolves them, so a key
// reaches the client only the way the configuration says.
func New(cfg Config) *Client {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	base = strings.TrimSuffix(base, "/v1")
	c := &Client{maxRetries: cfg.MaxRetries, backoff: cfg.Backoff, maxTokens: cfg.MaxTokens, thinking: cfg.ThinkingBudget}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.urlErr = fmt.Errorf("anthropic: invalid base URL %q: want http(s)://host[:port][/path]", redact.String(cfg.BaseURL))
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	if c.maxTokens <= 0 {
		c.maxTokens = DefaultMaxTokens
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithHeader("User-Agent", "hermes"),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	c.sdk = sdk.NewClient(opts...)
	return c
}

// Stream implements model.Provider. A failure before any chunk has been yielded (an HTTP
// error, a refused connection, an error event before the first content) is retried when it is
// retryable: 408, 409, 429, 5xx (529 overloaded included) or an overloaded_error, api_error or
// rate_limit_error event, unless x-should-retry says otherwise. Once a chunk has been yielded
// nothing is retried: the caller may have shown it or started acting on it, and a second
// answer would repeat text or tool calls.
func (c *Client) Stream(ctx context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		if c.urlErr != nil {
			yield(model.Chunk{}, c.urlErr)
			return
		}
		params, opts := encodeRequest(r, c.maxTokens, c.thinking)
		for attempt := 0; ; attempt++ {
			yielded, err := c.attempt(ctx, params, opts, func(ch model.Chunk) bool {
				return yield(ch, nil)
			})
			if err == nil {
				return
			}
			if errors.Is(err, errStopped) {
				return
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				yield(model.Chunk{}, ctxErr)
				return
			}
			var me *model.Error
			errors.As(err, &me)
			retryable := model.Retryable(err)
			if !yielded && retryable && attempt < c.maxRetries {
				var after time.Duration
				if me != nil {
					after = me.RetryAfter
				}
				if serr := sleep(ctx, c.delay(attempt+1, after)); serr != nil {
					yield(model.Chunk{}, serr)
					return
				}
				continue
			}
			if me != nil && !yielded && retryable {
				me.Attempts = attempt + 1
			} else if !yielded && retryable && attempt > 0 {
				err = fmt.Errorf("%w (gave up after %d attempts: retry budget spent)", err, attempt+1)
			}
			yield(model.Chunk{}, err)
			return
		}
	}
}

// errStopped reports that the caller stopped iterating.
var errStopped = errors.New("stopped by the caller")

// attempt sends one request and streams its answer to emit. yielded reports whether any chunk
// reached the caller.
func (c *Client) attempt(ctx context.Context, params sdk.MessageNewParams, opts []option.RequestOption, emit func(model.Chunk) bool) (yielded bool, err error) {
	var resp *http.Response
	stream := c.sdk.Messages.NewStreaming(ctx, params, append([]option.RequestOption{option.WithResponseInto(&resp)}, opts...)...)
	defer stream.Close()
	d := &decoder{}
	for stream.Next() {
		for _, ch := range d.event(stream.Current()) {
			yielded = true
			if !emit(ch) {
				return true, errStopped
			}
		}
	}
	if err := stream.Err(); err != nil {
		return yielded, mapError(err, resp)
	}
	if !d.stopped {
		return yielded, ErrIncompleteStream
	}
	return yielded, nil
}

// delay is the wait before retry number attempt (1-based): the server's Retry-After when it
// gave one (capped), else exponential backoff from 0.5s to 8s with jitter.
func (c *Client) delay(attempt int, after time.Duration) time.Duration {
	if c.backoff != nil {
		return c.backoff(attempt)
	}
	if after > 0 {
		return min(after, maxRetryAfter)
	}
	d := min(500*time.Millisecond<<min(attempt-1, 5), 8*time.Second)
	return d - time.Duration(rand.Float64()*0.25*float64(d))
}

// maxRetryAfter caps a server-requested delay, so a far-off reset fails the call in bounded time.
const maxRetryAfter = 30 * time.Second

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter reads retry-after-ms or Retry-After (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return capDelay(time.Duration(ms * float64(time.Millisecond)))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return capDelay(time.Duration(s * float64(time.Second)))
	}
	if t, err := http.ParseTime(v); err == nil {
		return capDelay(max(t.Sub(now), 0))
	}
	return 0
}

func capDelay(d time.Duration) time.Duration {
	if d < 0 || d > maxRetryAfter {
		return maxRetryAfter
	}
	return d
}
