/**
 * What a reconcile returns: {@link Outcome}, with {@link Event}s to record.
 * @module
 */

/** Type of a Kubernetes Event. */
export type EventType = "Normal" | "Warning";

/**
 * A Kubernetes Event to record on the primary.
 *
 * @example
 * ```ts
 * Event.warning("BadImage", "Reconcile").note("the image cannot be pulled");
 * ```
 */
export class Event {
  /** Human readable detail. */
  noteText: string | undefined = undefined;

  private constructor(
    /** Normal or Warning. */
    readonly type: EventType,
    /** Short CamelCase reason, e.g. `Reconciled`. */
    readonly reason: string,
    /** What was done, e.g. `Reconcile`. */
    readonly action: string,
  ) {}

  /** A Normal event. */
  static normal(reason: string, action: string): Event {
    return new Event("Normal", reason, action);
  }

  /** A Warning event. */
  static warning(reason: string, action: string): Event {
    return new Event("Warning", reason, action);
  }

  /** Adds a human readable note. */
  note(note: string): this {
    this.noteText = note;
    return this;
  }
}

/** Whether the primary is ready, in the plugin's words. */
export interface Readiness {
  /** Ready (`Ready` True) or still progressing (`Ready` False, `Reconciling` True). */
  readonly ready: boolean;
  /** The conditions' message. */
  readonly message: string;
}

/**
 * What the host should do after a successful reconcile: the readiness it turns into the
 * primary's `Ready`, `Reconciling` and `Degraded` conditions, a status to merge, labels and
 * annotations, a reschedule and events.
 *
 * @example
 * ```ts
 * return Outcome.ready("greeted").status({ message: `Hello, ${greeting.spec.name}!` });
 * return Outcome.notReady("waiting for the database").rescheduleAfter(30_000);
 * ```
 */
export class Outcome {
  /** Whether the primary is ready; absent: the host leaves the conditions alone. */
  readiness: Readiness | undefined = undefined;
  /** The JSON object merged into `.status`. */
  statusValue: object | undefined = undefined;
  /** Reconcile again after this many milliseconds unless an event comes first. */
  rescheduleAfterMs: number | undefined = undefined;
  /** Events to record on the primary. */
  readonly events: Event[] = [];
  /** Labels of the primary to set (a value) or remove (`undefined`). */
  readonly labels: [string, string | undefined][] = [];
  /** Annotations of the primary to set (a value) or remove (`undefined`). */
  readonly annotations: [string, string | undefined][] = [];

  private constructor() {}

  /** Nothing to say about readiness: no status, no reschedule. */
  static done(): Outcome {
    return new Outcome();
  }

  /** The primary is ready; `message` goes into its `Ready` condition. */
  static ready(message: string): Outcome {
    const outcome = new Outcome();
    outcome.readiness = { ready: true, message };
    return outcome;
  }

  /** The primary is still progressing (`Ready` False, `Reconciling` True). */
  static notReady(message: string): Outcome {
    const outcome = new Outcome();
    outcome.readiness = { ready: false, message };
    return outcome;
  }

  /**
   * Merges `status` (a JSON object) into the primary's `.status`. The host sets
   * `observedGeneration` unless the plugin does, and writes nothing when the status already
   * holds these values.
   */
  status(status: object): this {
    this.statusValue = status;
    return this;
  }

  /** Reconciles again after `ms` milliseconds unless an event comes first. */
  rescheduleAfter(ms: number): this {
    this.rescheduleAfterMs = ms;
    return this;
  }

  /** Records an event on the primary. */
  event(event: Event): this {
    this.events.push(event);
    return this;
  }

  /** Sets a label of the primary. */
  label(key: string, value: string): this {
    this.labels.push([key, value]);
    return this;
  }

  /** Removes a label of the primary. */
  removeLabel(key: string): this {
    this.labels.push([key, undefined]);
    return this;
  }

  /** Sets an annotation of the primary. */
  annotation(key: string, value: string): this {
    this.annotations.push([key, value]);
    return this;
  }

  /** Removes an annotation of the primary. */
  removeAnnotation(key: string): this {
    this.annotations.push([key, undefined]);
    return this;
  }
}
