/**
 * The egress policy proxy: HTTP/1.1 (absolute form and CONNECT) and SOCKS5,
 * allow/deny domain patterns, limited mode, MITM hooks, managed
 * requirements.
 *
 * @example Start a proxy that allows one domain
 * ```ts ignore
 * import { defaultNetworkProxyConfig, NetworkProxy } from "jsr:@org/exec-server/proxy";
 *
 * const proxy = await NetworkProxy.start({
 *   ...defaultNetworkProxyConfig(),
 *   enabled: true,
 *   domains: { "api.github.com": "allow" },
 * });
 * console.log(proxy.addresses.http);
 * ```
 *
 * @module
 */

export {
  NetworkProxy,
  type NetworkProxyAddresses,
  type NetworkProxyOptions,
} from "./src/proxy/network_proxy.ts";
export { type ProxyFileOptions, startNetworkProxyFromFile } from "./src/proxy/start.ts";
export {
  defaultNetworkProxyConfig,
  type InjectHeaderConfig,
  type MitmHookConfig,
  NetworkConfigError,
  type NetworkMode,
  type NetworkProxyConfig,
  parseNetworkProxyConfig,
  type Socks5AuthConfig,
} from "./src/proxy/config.ts";
export {
  fileConfigSource,
  loadNetworkProxyConfigFile,
  loadNetworkRequirementsFile,
  parseNetworkProxyConfigText,
  requiredConfigSource,
} from "./src/proxy/config_file.ts";
export {
  applyNetworkRequirements,
  type ManagedNetworkConfig,
  NetworkConstraintError,
  type NetworkProxyConstraints,
  type NetworkRequirements,
  parseNetworkRequirements,
  patternCovers,
  validatePolicyAgainstConstraints,
} from "./src/proxy/constraints.ts";
export {
  ask,
  type AuditMetadata,
  type BlockedRequest,
  type BlockReason,
  type DecisionSource,
  deny,
  type NetworkDecider,
  type NetworkDecision,
  type NetworkPolicyRequest,
  type PolicyDecisionEvent,
  type PolicyDecisionInput,
  type PolicyProtocol,
} from "./src/proxy/decision.ts";
export {
  type ConfigSource,
  NetworkProxyState,
  type NetworkProxyStateOptions,
} from "./src/proxy/state.ts";
export type { ConfigState, HostResolver } from "./src/proxy/policy.ts";
export type { DomainMatcher } from "./src/proxy/domain_pattern.ts";
export type { HookActions, HookOutcome, HookRequest, MitmHooks } from "./src/proxy/mitm_hooks.ts";
export {
  applyProxyEnv,
  CUSTOM_CA_ENV_KEYS,
  type ManagedNetworkContext,
  PROXY_ENV_KEYS,
  type ProxyEnvTarget,
  stripManagedProxyEnv,
} from "./src/proxy/env.ts";
export type { MitmOptions } from "./src/proxy/mitm/interceptor.ts";
export {
  type BrokerTarget,
  CredentialBroker,
  maskableCommand,
  maskCredentials,
  type MaskedEnvironment,
} from "./src/proxy/credential_broker.ts";
export type { UpstreamProxies } from "./src/proxy/connector.ts";
export { type ProxyListener, ProxyMetrics, type UpstreamProtocol } from "./src/proxy/metrics.ts";
