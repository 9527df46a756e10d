package model

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestIsContextOverflow(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   bool
		tokens int
		limit  int
	}{
		{400, `{"error":{"message":"This model's maximum context length is 48000 tokens. However, your messages resulted in 52130 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true, 52130, 48000},
		{400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, true, 5000, 4096},
		{400, `{"error":{"code":"invalid_parameter_error","param":null,"message":"<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 30720]","type":"invalid_request_error"}}`, true, 0, 30720},
		{400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`, true, 0, 0},
		{400, `{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum","type":"invalid_request_error"}}`, true, 210000, 200000},
		{413, `{"error":{"message":"Request Entity Too Large"}}`, false, 0, 0},
		{413, `<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>`, false, 0, 0},
		{413, `{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum","type":"request_too_large"}}`, true, 210000, 200000},
		{400, `{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","code":"invalid_request_error"}}`, false, 0, 0},
		{429, `{"error":{"message":"maximum context length reached for your rate tier"}}`, false, 0, 0},
		{401, `{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`, false, 0, 0},
	} {
		err := NewHTTPError(tc.status, http.Header{}, []byte(tc.body), time.Now())
		assert.Equal(t, tc.want, IsContextOverflow(fmt.Errorf("wrapped: %w", err)), tc.body)
		assert.Equal(t, tc.tokens, OverflowTokens(err), tc.body)
		assert.Equal(t, tc.limit, OverflowLimit(err), tc.body)
	}
	assert.False(t, IsContextOverflow(fmt.Errorf("dial tcp: connection refused")))
}
