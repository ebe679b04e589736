/** Tools and the tool-calling agent. */
export { tool, StructuredTool, type ToolOptions } from './tool.js';
export { createToolCallingAgent, ToolCallingAgent, type ToolCallingAgentOptions, type AgentInput } from './agent.js';
export { calculatorTool, evaluateExpression, formatNumber } from './calculator.js';
