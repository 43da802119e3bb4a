package engine

import "context"

// SwapSetting sets the durable setting key to new when its current value is old, atomically
// across every process on the store, and reports whether it did. old == nil means "unset";
// new == nil removes the setting. Surfaces use it for records several processes may race to
// write (a request's claim on an Idempotency-Key).
func (e *Engine) SwapSetting(ctx context.Context, key string, old, new []byte) (bool, error) {
	return e.cfg.Store.CompareAndSwapKV(ctx, key, old, new)
}
