package httpapi

import "github.com/hermes-go/hermes/transports/httpapi/internal/wire"

// The API's wire (its error object, request decoding, identifier and header rules) is package
// internal/wire, shared with the route packages mounted here; these are its names in this
// package.
type (
	apiError = wire.Error
	flexBool = wire.FlexBool
)

const (
	maxHeaderID = wire.MaxHeaderID
	noClient    = wire.NoClient
)

var (
	badRequest          = wire.BadRequest
	withParam           = wire.WithParam
	errorBody           = wire.Body
	classify            = wire.Classify
	storeUnavailable    = wire.StoreUnavailable
	storeOutage         = wire.StoreOutage
	outcomeError        = wire.OutcomeError
	validSessionID      = wire.ValidSessionID
	validSessionKey     = wire.ValidSessionKey
	hasControl          = wire.HasControl
	decodeJSON          = wire.DecodeJSON
	checkID             = wire.CheckID
	queryInt            = wire.QueryInt
	validIdempotencyKey = wire.ValidIdempotencyKey
	newHex              = wire.NewHex
	sseHeaders          = wire.SSEHeaders
	compactionEvent     = wire.CompactionEvent
)
