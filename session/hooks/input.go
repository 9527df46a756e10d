package hooks

// Input is the JSON object a hook reads on its stdin, with the fields
// Claude Code sends; each event fills its own.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permission_mode,omitempty"`
	HookEventName  string `json:"hook_event_name"`
	// AgentID and AgentType are set inside a subagent's run.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`

	// Tool events. ToolName is the name Claude Code gives the tool
	// ("Bash"), AcpdToolName acpd's own ("run_shell_command").
	ToolName     string `json:"tool_name,omitempty"`
	AcpdToolName string `json:"acpd_tool_name,omitempty"`
	ToolInput    any    `json:"tool_input,omitempty"`
	ToolUseID    string `json:"tool_use_id,omitempty"`
	ToolResponse any    `json:"tool_response,omitempty"`
	DurationMS   *int64 `json:"duration_ms,omitempty"`

	// UserPromptSubmit.
	Prompt string `json:"prompt,omitempty"`
	// Stop and SubagentStop.
	StopHookActive       *bool  `json:"stop_hook_active,omitempty"`
	LastAssistantMessage string `json:"last_assistant_message,omitempty"`
	// SessionStart: startup or resume; Model the session's model.
	Source string `json:"source,omitempty"`
	Model  string `json:"model,omitempty"`
	// SessionEnd: why (clear, logout, prompt_input_exit, other).
	Reason string `json:"reason,omitempty"`
	// PreCompact: manual or auto, and the focus the user gave.
	Trigger            string `json:"trigger,omitempty"`
	CustomInstructions string `json:"custom_instructions,omitempty"`
	// Notification.
	Message          string `json:"message,omitempty"`
	Title            string `json:"title,omitempty"`
	NotificationType string `json:"notification_type,omitempty"`
}

// PermissionMode is acpd's approval mode as Claude Code names its
// permission modes.
func PermissionMode(mode string) string {
	switch mode {
	case "auto-edit":
		return "acceptEdits"
	case "yolo":
		return "bypassPermissions"
	}
	return mode
}
