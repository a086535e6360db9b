// The site's webhooks: its endpoints (GET /api/1/webhooks), one endpoint's recent deliveries
// newest first, or its failures alone, a page at a time (GET /api/1/webhooks/deliveries), and a
// replay of a delivery (POST /api/1/webhooks/deliveries/replay). Endpoints are added by the
// operator (`cli webhook add`); the API never shows their signing secrets.
import type { components } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { accountHref } from '../route.ts';
import { Action, Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';

type Endpoint = components['schemas']['WebhookEndpoint'];
type Delivery = components['schemas']['WebhookDelivery'];
type State = components['schemas']['WebhookDeliveryState'];

const PAGE = 20;

function health(endpoint: Endpoint): string {
  if (endpoint.disabledAt) return `Switched off ${formatTime(endpoint.disabledAt)}: ${endpoint.disabledReason ?? ''}`;
  if (endpoint.failingSince) return `Failing since ${formatTime(endpoint.failingSince)}`;
  return 'Sending';
}

export function WebhooksScreen({ api, refused }: ScreenProps) {
  const [endpoints, setEndpoints] = useState<Endpoint[]>();
  const [chosen, setChosen] = useState<string>();
  const [failure, setFailure] = useState<string>();
  const [version, setVersion] = useState(0);

  useEffect(() => {
    api
      .GET('/api/1/webhooks')
      .then(({ data, error }) => {
        setFailure(error ? describeFailure(error) : undefined);
        if (!data) return;
        setEndpoints(data.result.endpoints);
        setChosen((current) => current ?? data.result.endpoints[0]?.endpointId);
      })
      .catch((error: unknown) => setFailure(describeFailure(error)));
  }, [api, version]);

  return (
    <section>
      <h1 tabIndex={-1}>Webhooks</h1>
      <Lacking scope="events" refused={refused} />
      <Alert message={failure} />
      {endpoints && endpoints.length === 0 && (
        <p>
          This site sends its events to no webhook. An operator adds one with{' '}
          <code>./pnpmw cli webhook add --site NAME --url URL</code>.
        </p>
      )}
      {endpoints && endpoints.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Endpoints" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Endpoint</th>
                <th scope="col">Events</th>
                <th scope="col">Health</th>
                <th scope="col">Pending</th>
                <th scope="col">Deliveries</th>
              </tr>
            </thead>
            <tbody>
              {endpoints.map((endpoint) => (
                <tr key={endpoint.endpointId}>
                  <td class="mono">{endpoint.url}</td>
                  <td>{endpoint.types.join(', ')}</td>
                  <td>{health(endpoint)}</td>
                  <td>{endpoint.pending}</td>
                  <td>
                    <button
                      type="button"
                      class="secondary"
                      aria-pressed={chosen === endpoint.endpointId}
                      onClick={() => setChosen(endpoint.endpointId)}
                    >
                      Show deliveries<span class="visually-hidden"> to {endpoint.url}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {chosen && endpoints && (
        <Deliveries
          key={chosen}
          {...{ api, refused }}
          endpoint={endpoints.find((e) => e.endpointId === chosen)!}
          onReplayed={() => setVersion((v) => v + 1)}
        />
      )}
    </section>
  );
}

function Deliveries({
  api,
  refused,
  endpoint,
  onReplayed,
}: ScreenProps & { endpoint: Endpoint; onReplayed: () => void }) {
  const [state, setState] = useState<State | 'any'>('any');
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [failure, setFailure] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [busy, setBusy] = useState<string>();
  const [version, setVersion] = useState(0);

  async function load(before?: string) {
    const { data, error } = await api.GET('/api/1/webhooks/deliveries', {
      params: {
        query: {
          endpointId: endpoint.endpointId,
          limit: PAGE,
          ...(state !== 'any' && { state }),
          ...(before !== undefined && { before }),
        },
      },
    });
    setFailure(error ? describeFailure(error) : undefined);
    if (!data) return;
    setDeliveries((shown) => (before === undefined ? data.result.deliveries : [...shown, ...data.result.deliveries]));
    setNext(data.result.next);
  }
  useEffect(() => {
    load().catch((error: unknown) => setFailure(describeFailure(error)));
  }, [api, endpoint.endpointId, state, version]);

  async function replay(delivery: Delivery) {
    setBusy(delivery.deliveryId);
    setNotice(undefined);
    try {
      const { data, error } = await api.POST('/api/1/webhooks/deliveries/replay', {
        body: { deliveryId: delivery.deliveryId },
      });
      if (error) setFailure(describeFailure(error));
      else {
        setFailure(undefined);
        setNotice(`The API answered: ${data.result.status} (delivery ${data.result.delivery.deliveryId}).`);
        setVersion((v) => v + 1);
        onReplayed();
      }
    } catch (error) {
      setFailure(describeFailure(error));
    } finally {
      setBusy(undefined);
    }
  }

  return (
    <section aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">Deliveries to {endpoint.url}</h2>
      <div class="field">
        <label for="delivery-state">Show</label>
        <select
          id="delivery-state"
          value={state}
          onChange={(event) => setState(event.currentTarget.value as State | 'any')}
        >
          <option value="any">All, newest first</option>
          <option value="failed">Failures (given up)</option>
          <option value="pending">Pending</option>
          <option value="delivered">Delivered</option>
        </select>
      </div>
      <Alert message={failure} />
      <p role="status">{notice}</p>
      {deliveries.length === 0 && <p>No deliveries.</p>}
      {deliveries.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Deliveries, newest first" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Event</th>
                <th scope="col">Account</th>
                <th scope="col">State</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last error</th>
                <th scope="col">Replay</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((delivery) => (
                <tr key={delivery.deliveryId}>
                  <td>
                    <time dateTime={delivery.createdAt}>{formatTime(delivery.createdAt)}</time>
                  </td>
                  <td>
                    {delivery.type} <span class="hint">#{Number(delivery.sequence)}</span>
                  </td>
                  <td>
                    <a href={accountHref(delivery._userId)} class="mono">
                      {delivery._userId.slice(0, 8)}…
                    </a>
                  </td>
                  <td>{delivery.state}</td>
                  <td>{delivery.attempts}</td>
                  <td>
                    {delivery.lastError ?? (delivery.lastStatus === null ? '—' : `answered ${delivery.lastStatus}`)}
                  </td>
                  <td>
                    <Action
                      scope="events"
                      refused={refused}
                      busy={busy === delivery.deliveryId}
                      onClick={() => replay(delivery)}
                    >
                      Replay<span class="visually-hidden"> delivery {delivery.deliveryId}</span>
                    </Action>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {next !== null && (
        <button type="button" onClick={() => load(next).catch((error: unknown) => setFailure(describeFailure(error)))}>
          Older deliveries
        </button>
      )}
    </section>
  );
}
